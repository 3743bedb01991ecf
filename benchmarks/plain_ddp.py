"""A plain DDP training script with no Triage code in it: the workload on which `triage bench
hooks` measures the zero-code instrumentation, run by torchrun with and without it.

    torchrun --standalone --nproc-per-node 4 plain_ddp.py --steps 30

Rank 0 prints one JSON line at the end: {"step_time_p50_s": ...} over the steps after the
first (start-up excluded).
"""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--width", type=int, default=512)
    args = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    w = args.width
    model = DDP(torch.nn.Sequential(torch.nn.Linear(w, 4 * w), torch.nn.GELU(), torch.nn.Linear(4 * w, w)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        x = torch.randn(64, w)
        loss = torch.nn.functional.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call,unused-ignore]  # torch leaves backward unannotated
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print(json.dumps({"step_time_p50_s": statistics.median(times[1:])}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
