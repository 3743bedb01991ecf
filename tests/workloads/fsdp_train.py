"""A plain FSDP2 training script, as a user writes one: no Triage code in it.

    torchrun --nproc-per-node 2 fsdp_train.py --steps 20 --checkpoint ckpt_dir

Each block is sharded with `fully_shard`; the model and optimizer are saved every step with
torch.distributed.checkpoint into their own folder and loaded from it on start, so a restart
resumes; rank 0 also keeps the trainer's own state (step, RNG) with `torch.save`, alone, before
the step's closing barrier. The tests inject faults through `workload_faults`.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from workload_faults import evaluate, fault, prepare, prepares_before, save_extras


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--checkpoint", default="ckpt")
    p.add_argument("--step-sleep", type=float, default=0.05)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()) for _ in range(3)),
        torch.nn.Linear(32, 1),
    )
    for block in model[:3]:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = 0
    marker = os.path.join(args.checkpoint, "step.txt")
    if os.path.exists(marker):
        model_sd, optim_sd = get_state_dict(model, opt)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=args.checkpoint)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        with open(marker) as fh:
            start = int(fh.read())
        print(f"resumed from step {start}", flush=True)
    for step in range(start, args.steps):
        if prepares_before(step):
            prepare(rank)  # the evaluation data, on one rank first
            dist.barrier()
            evaluate(model)
        fault(step, rank)
        x = torch.randn(16, 32)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        model_sd, optim_sd = get_state_dict(model, opt)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=args.checkpoint)
        if rank == 0:
            trainer_state = {"step": step + 1, "rng": torch.get_rng_state(), **save_extras(step, rank)}
            torch.save(trainer_state, os.path.join(args.checkpoint, "trainer_state.pt"))
            with open(marker + ".tmp", "w") as fh:
                fh.write(str(step + 1))
            os.replace(marker + ".tmp", marker)
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        dist.barrier()
        time.sleep(args.step_sleep)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
