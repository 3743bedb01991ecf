"""Start the reference trainer under torchrun, one torchrun per (simulated) node, and write the
run summary whatever way the ranks end.

torchrun is `python -m torch.distributed.run` of this very interpreter (nothing relies on
PATH). Without `--node-rank`, all `--nnodes` nodes start on this machine on loopback with c10d
rendezvous, named `node0`, `node1`, ... through TRIAGE_NODE; with `--node-rank K`, this is one
node of a real cluster and TRIAGE_NODE is left to the host name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from triage.config import (
    ENV_ATTEMPT,
    ENV_DATA_DIR,
    ENV_EXCLUDE_NODES,
    ENV_JOB_ID,
    ENV_LOCAL_ADDR,
    ENV_NODE,
    EXIT_PREEMPTED,
    ConfigError,
)
from triage.ports import free_port
from triage.reference_trainer.summary import build_summary, progress_path, read_progress_log, write_summary
from triage.reference_trainer.train_config import TrainConfig, attempt_from_env

_POLL_S = 0.2


def prepare_run_dir(run_dir: str) -> Path:
    """Create the run directory and prove it writable before any rank starts."""
    path = Path(run_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"--run-dir {run_dir}: cannot write there ({exc.strerror}); pass a writable directory"
        ) from None
    return path


def excluded_nodes_from_env() -> frozenset[str]:
    """The simulated nodes the supervisor left out (TRIAGE_EXCLUDE_NODES=node1,...)."""
    return frozenset(filter(None, (n.strip() for n in os.environ.get(ENV_EXCLUDE_NODES, "").split(","))))


def local_nodes(cfg: TrainConfig) -> list[int]:
    """Indices of the simulated nodes to start: all `--nnodes` but the excluded ones, which
    keep their names so a node's telemetry stays attributed to it across attempts."""
    excluded = excluded_nodes_from_env()
    kept = [k for k in range(cfg.nnodes) if f"node{k}" not in excluded]
    if not kept:
        raise ConfigError(
            f"env {ENV_EXCLUDE_NODES}={os.environ.get(ENV_EXCLUDE_NODES)} leaves "
            f"none of the {cfg.nnodes} nodes; unset it or start more nodes"
        )
    return kept


def torchrun_command(
    cfg: TrainConfig, node_rank: int, endpoint: str | None, *, local: bool, nnodes: int | None = None
) -> list[str]:
    """`nnodes`: the nodes that actually start (fewer than `--nnodes` once some are excluded)."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nnodes or cfg.nnodes),
        "--nproc-per-node",
        str(cfg.nproc_per_node),
        "--max-restarts",
        str(cfg.max_restarts),
        "--shutdown-timeout",
        str(cfg.shutdown_timeout),
    ]
    if endpoint is None:
        cmd += ["--standalone"]
    else:
        cmd += [
            "--node-rank",
            str(node_rank),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            str(cfg.job_id),
        ]
        if local:  # every simulated node is "this host": say which one serves the rendezvous
            cmd += [
                "--local-addr",
                "127.0.0.1",
                "--rdzv-conf",
                f"is_host={'true' if node_rank == 0 else 'false'}",
            ]
        elif os.environ.get(ENV_LOCAL_ADDR):
            # a node of a `triage run --launcher slurm` step: the endpoint is the step's first
            # node, which serves the rendezvous (nodes may share a host on a test cluster)
            cmd += [
                "--local-addr",
                os.environ[ENV_LOCAL_ADDR],
                "--rdzv-conf",
                f"is_host={'true' if node_rank == 0 else 'false'}",
            ]
    return cmd + ["-m", "triage.reference_trainer.worker", "--config", cfg.to_json()]


def node_env(cfg: TrainConfig, node_index: int, *, local: bool) -> dict[str, str]:
    env = dict(os.environ)
    env[ENV_JOB_ID] = str(cfg.job_id)
    env[ENV_ATTEMPT] = str(attempt_from_env())
    env[ENV_DATA_DIR] = str(cfg.data_dir)
    if local:
        env[ENV_NODE] = f"node{node_index}"
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


class _Nodes:
    """The torchrun processes of this launcher. They run in their own sessions, so a signal to
    the launcher reaches each of them exactly once, forwarded."""

    def __init__(self, cfg: TrainConfig) -> None:
        local = cfg.node_rank is None
        if local:  # node ranks count the started nodes; names keep their index
            started = local_nodes(cfg)
            nodes = list(enumerate(started))
        else:
            assert cfg.node_rank is not None  # not local
            started, nodes = list(range(cfg.nnodes)), [(cfg.node_rank, cfg.node_rank)]
        endpoint = cfg.rdzv_endpoint
        if endpoint is None and len(started) > 1:
            endpoint = f"127.0.0.1:{free_port()}"
        self.world_size = len(started) * cfg.nproc_per_node
        self.procs = [
            subprocess.Popen(
                torchrun_command(cfg, rank, endpoint, local=local, nnodes=len(started)),
                env=node_env(cfg, index, local=local),
                start_new_session=True,
            )
            for rank, index in nodes
        ]
        # After one node fails, the others fail on their own once their collectives time out;
        # past that (plus torchrun's shutdown) a node still running is stuck, e.g. in rendezvous.
        # A torchrun stuck inside a C++ call never runs its SIGTERM handler: it gets SIGKILL
        # once its own shutdown had time to finish.
        self.forwarded: set[int] = set()
        self.straggle_s = cfg.collective_timeout + cfg.shutdown_timeout + 30
        self.kill_after_s = cfg.shutdown_timeout + 15

    def forward(self, signum: int, frame: Any = None) -> None:
        """Pass a signal on, each kind once: torchrun raises out of its own shutdown on every
        further SIGTERM and can then hang without its failure report."""
        if signum in self.forwarded:
            return
        self.forwarded.add(signum)
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signum)

    def wait(self) -> list[int]:
        first_failure: float | None = None
        terminated: float | None = None
        while any(p.poll() is None for p in self.procs):
            now = time.monotonic()
            if first_failure is None and any(p.returncode not in (None, 0) for p in self.procs):
                first_failure = now
            if terminated is None and first_failure is not None and now - first_failure > self.straggle_s:
                print(
                    "triage train: a node still runs long after another failed; stopping it",
                    file=sys.stderr,
                    flush=True,
                )
                self.forward(signal.SIGTERM)
                terminated = now
            if terminated is not None and now - terminated > self.kill_after_s:
                print("triage train: a node ignored SIGTERM; killing it", file=sys.stderr, flush=True)
                for p in self.procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                terminated = float("inf")
            time.sleep(_POLL_S)
        return [p.returncode for p in self.procs]


def launch(cfg: TrainConfig) -> int:
    """Run the job to its end; 0 when it completed, 143 when preempted with its checkpoint
    saved, else torchrun's non-zero status (1 when a rank failed)."""
    prepare_run_dir(str(cfg.run_dir))
    attempt = attempt_from_env()
    # one progress log per attempt: torchrun's own restarts (--max-restarts) are attempts too
    progress = [progress_path(str(cfg.run_dir), a) for a in range(attempt, attempt + cfg.max_restarts + 1)]
    hosts_rank0 = cfg.node_rank in (None, 0)
    if hosts_rank0:
        for path in progress:
            path.unlink(missing_ok=True)  # a stale record must not pose as this run's
    nodes = _Nodes(cfg)
    previous = {s: signal.signal(s, nodes.forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        codes = nodes.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    events = next((e for e in map(read_progress_log, reversed(progress)) if e), [])
    completed = all(c == 0 for c in codes) and any(e["event"] == "end" for e in events)
    summary = build_summary(events, job_id=str(cfg.job_id), world_size=nodes.world_size, completed=completed)
    if cfg.summary:
        write_summary(cfg.summary, summary)
    if completed:
        return 0
    if summary["preempted_checkpoint_step"] is not None:
        return EXIT_PREEMPTED
    return next((c for c in codes if c != 0), 1)
