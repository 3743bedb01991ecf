"""The demo's fault scenarios: one injected fault each on the reference trainer, 2 simulated
nodes x 2 ranks on loopback, and what Triage is expected to name and do. `triage demo`,
`triage bench recovery` and the scenario tests share them.

The job runs with a short collective timeout (15 s) and a short hang timeout (15 s) instead of
NCCL's 10 minutes, so that a scenario ends within a few minutes on a 2-core machine.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from triage.supervisor.config import SupervisorConfig
from triage.taxonomy import Action, Category

#: The demo's training job: tiny model, checkpoint every 5 steps, fast failure of collectives.
STEPS = 30
COLLECTIVE_TIMEOUT_S = 15
HANG_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    inject: tuple[str, ...]
    category: Category | None  # the verdict expected (None: no failure)
    action: Action | None  # what the supervisor is expected to do about it

    def train_command(
        self, *, steps: int = STEPS, nnodes: int = 2, nproc_per_node: int = 2, extra: tuple[str, ...] = ()
    ) -> list[str]:
        return train_argv(
            nnodes=nnodes,
            nproc_per_node=nproc_per_node,
            steps=steps,
            checkpoint_every=5,
            collective_timeout=COLLECTIVE_TIMEOUT_S,
            shutdown_timeout=10,
            inject=tuple(placed(spec, nnodes, nproc_per_node) for spec in self.inject),
            extra=extra,
        )


#: The layout (nodes, ranks per node) the scenarios' culprit ranks are written for.
DEMO_LAYOUT = (2, 2)
_RANK_ITEM = re.compile(r"(?<=[@,])rank=(\d+)")


def placed(spec: str, nnodes: int, nproc_per_node: int) -> str:
    """An `--inject` spec whose rank exists in a job of `nnodes` x `nproc_per_node`: the rank
    where it exists, else the rank at the same node and local index of the demo's layout,
    clamped to the job's (rank 3, the second node's second rank, is rank 1 on 2 x 1)."""

    def move(m: re.Match[str]) -> str:
        rank = int(m.group(1))
        if rank < nnodes * nproc_per_node:
            return m.group(0)
        node, local = divmod(rank, DEMO_LAYOUT[1])
        return f"rank={min(node, nnodes - 1) * nproc_per_node + min(local, nproc_per_node - 1)}"

    return _RANK_ITEM.sub(move, spec)


def train_argv(
    *,
    nnodes: int,
    nproc_per_node: int,
    steps: int,
    checkpoint_every: int,
    collective_timeout: float,
    shutdown_timeout: int,
    inject: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
) -> list[str]:
    """`triage train` of this interpreter with the tiny model's defaults and `--inject` faults:
    the job every scenario and benchmark trial runs."""
    cmd = [
        sys.executable,
        "-m",
        "triage.cli",
        "train",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        str(nproc_per_node),
        "--steps",
        str(steps),
        "--checkpoint-every",
        str(checkpoint_every),
        "--collective-timeout",
        str(collective_timeout),
        "--shutdown-timeout",
        str(shutdown_timeout),
    ]
    for spec in inject:
        cmd += ["--inject", spec]
    return cmd + list(extra)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "gpu-lost",
            "a GPU falls off the bus (Xid 79) under rank 3 at step 8; the other ranks block in a collective",
            ("xid@step=8,rank=3,xid=79",),
            Category.GPU_FALLEN_OFF_BUS,
            Action.RESTART_EXCLUDING_NODE,
        ),
        Scenario("crash", "rank 3 is SIGKILLed at step 8", ("kill@step=8,rank=3",), None, Action.RESTART),
        Scenario(
            "hang",
            "rank 1 stops entering collectives at step 8 (alive, no progress)",
            ("hang@step=8,rank=1",),
            Category.COLLECTIVE_TIMEOUT,
            Action.RESTART_EXCLUDING_NODE,
        ),
        Scenario(
            "straggler",
            "thermal throttling slows rank 2's GPU 3x from step 3: a straggler, no crash",
            ("thermal@step=3,rank=2,factor=3",),
            Category.GPU_THROTTLING,
            None,
        ),
        Scenario(
            "oom",
            "CUDA out of memory on rank 0 at step 8",
            ("oom@step=8,rank=0",),
            Category.GPU_OOM,
            Action.FAIL_FAST,
        ),
        Scenario(
            "nan",
            "rank 1's activations turn NaN at step 12",
            ("nan@step=12,rank=1",),
            Category.NUMERICAL_INSTABILITY,
            Action.ROLLBACK,
        ),
        Scenario(
            "preemption",
            "the scheduler sends SIGTERM at step 8; the ranks save a checkpoint and exit 143",
            ("sigterm@step=8",),
            Category.PREEMPTION,
            Action.CHECKPOINT_AND_REQUEUE,
        ),
        Scenario(
            "disk-full",
            "the disk fills up during the checkpoint at step 10 on rank 1",
            ("disk_full@step=10,rank=1",),
            Category.STORAGE_ERROR,
            Action.RESTART,
        ),
        Scenario(
            "network",
            "rank 2's TCP connections are cut at step 8",
            ("network@step=8,rank=2",),
            Category.NETWORK_ERROR,
            Action.RESTART_EXCLUDING_NODE,
        ),
        Scenario(
            "sdc",
            "silent data corruption: rank 1's matmuls are off by 1e-3 from step 5, no error",
            ("sdc@step=5,rank=1",),
            Category.SILENT_DATA_CORRUPTION,
            Action.RESTART_EXCLUDING_NODE,
        ),
    ]
}
DEFAULT_SCENARIO = "gpu-lost"


def demo_supervisor_config(job_id: str, data_dir: str, *, echo_output: bool = True) -> SupervisorConfig:
    """The supervisor settings every scenario runs under, in `triage demo` and in
    `triage bench recovery` alike: the demo's short hang timeout, a short backoff and grace."""
    return SupervisorConfig(
        job_id=job_id,
        data_dir=data_dir,
        hang_timeout=HANG_TIMEOUT_S,
        backoff=1.0,
        grace=5.0,
        max_restarts=3,
        echo_output=echo_output,
    )
