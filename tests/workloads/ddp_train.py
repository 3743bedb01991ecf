"""A plain DDP training script, as a user writes one: no Triage code in it.

    torchrun --nproc-per-node 2 ddp_train.py --steps 20 --checkpoint ckpt.pt

It resumes from its own checkpoint file. The tests inject faults through `workload_faults`.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from workload_faults import fault, linger


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--checkpoint", default="ckpt.pt")
    p.add_argument("--step-sleep", type=float, default=0.05)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    start = 0
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"resumed from step {start}", flush=True)
    for step in range(start, args.steps):
        fault(step, rank, model)
        x = torch.randn(16, 32)
        loss = torch.nn.functional.mse_loss(ddp(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step + 1}, tmp)
            os.replace(tmp, args.checkpoint)
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(args.step_sleep)
    dist.destroy_process_group()
    linger(rank)


if __name__ == "__main__":
    main()
