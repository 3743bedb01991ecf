"""One node's task of a `triage run --launcher slurm` step: start the node's share of the job.

`srun` starts this once per node. It names the node for Triage (TRIAGE_NODE from
SLURMD_NODENAME), finds the step's first node, which serves the rendezvous, and runs the
command with the multi-node arguments it needs:
- `torchrun ...` / `python -m torch.distributed.run ...`: `--nnodes`, `--node-rank`,
  `--rdzv-backend c10d`, `--rdzv-endpoint FIRST:PORT`, `--rdzv-id`, `--local-addr`, added where
  the command does not give them (`--standalone` is dropped: it would make each node a job);
- `triage train ...`: `--nnodes`, `--node-rank`, `--rdzv-endpoint`;
- anything else runs as given, with TRIAGE_NNODES, TRIAGE_NODE_RANK and TRIAGE_RDZV_ENDPOINT
  in its environment for its own launcher to use.
The rendezvous host is told which node it is (`is_host`), so that nodes sharing one host (a
test cluster of several slurmd on one machine) do not all try to serve it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from triage.config import ENV_LOCAL_ADDR, ENV_NNODES, ENV_NODE, ENV_NODE_RANK, ENV_RDZV_ENDPOINT
from triage.supervisor.slurm import hostnames, node_address


def _has(args: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _torchrun_at(cmd: Sequence[str]) -> int | None:
    """Index of the first argument after the torchrun launcher itself, or None."""
    if cmd and os.path.basename(cmd[0]) == "torchrun":
        return 1
    for i in range(len(cmd) - 2):
        if cmd[i + 1 : i + 3] == ["-m", "torch.distributed.run"] and "python" in os.path.basename(cmd[i]):
            return i + 3
    return None


def _triage_train_at(cmd: Sequence[str]) -> int | None:
    for i, a in enumerate(cmd[:-1]):
        if os.path.basename(a) == "triage" and cmd[i + 1] == "train":
            return i + 2
        if a == "triage.cli" and cmd[i + 1] == "train":
            return i + 2
    return None


def node_command(
    cmd: Sequence[str], *, nnodes: int, node_rank: int, endpoint: str, local_addr: str, rdzv_id: str
) -> list[str]:
    out = list(cmd)
    at = _torchrun_at(out)
    if at is not None:
        launcher_args = [a for a in out[at:] if a != "--standalone"]
        # torchrun's own flags come before the script: insert ours right after the launcher
        extra: list[str] = []
        for flag, value in (
            ("--nnodes", str(nnodes)),
            ("--node-rank", str(node_rank)),
            ("--rdzv-backend", "c10d"),
            ("--rdzv-endpoint", endpoint),
            ("--rdzv-id", rdzv_id),
            ("--local-addr", local_addr),
        ):
            if not _has(launcher_args, flag) and not _has(launcher_args, flag.replace("-", "_")):
                extra += [flag, value]
        if not _has(launcher_args, "--rdzv-conf"):
            extra += ["--rdzv-conf", f"is_host={'true' if node_rank == 0 else 'false'}"]
        return out[:at] + extra + launcher_args
    at = _triage_train_at(out)
    if at is not None:
        return [*out, "--nnodes", str(nnodes), "--node-rank", str(node_rank), "--rdzv-endpoint", endpoint]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="triage.supervisor.slurm_node", description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="rendezvous port on the step's first node")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command after --")
    node = os.environ.get("SLURMD_NODENAME")
    step_nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if not node or not step_nodes:
        print("triage slurm_node: not inside an srun step (SLURMD_NODENAME unset)", file=sys.stderr)
        return 2
    nodes = hostnames(step_nodes)
    rank = int(os.environ.get("SLURM_NODEID") or nodes.index(node))
    endpoint = f"{node_address(nodes[0])}:{args.port}"
    env = dict(os.environ)
    env[ENV_NODE] = node
    local_addr = node_address(node)
    env.update(
        {
            ENV_NNODES: str(len(nodes)),
            ENV_NODE_RANK: str(rank),
            ENV_RDZV_ENDPOINT: endpoint,
            ENV_LOCAL_ADDR: local_addr,
        }
    )
    full = node_command(
        cmd,
        nnodes=len(nodes),
        node_rank=rank,
        endpoint=endpoint,
        local_addr=local_addr,
        rdzv_id=f"{os.environ.get('SLURM_JOB_ID', 'job')}.{os.environ.get('SLURM_STEP_ID', '0')}",
    )
    sys.stdout.flush()
    os.execvpe(full[0], full, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
