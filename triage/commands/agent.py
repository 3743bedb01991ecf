"""Run the per-node agent: sample GPU, host and kernel-log collectors, ingest the local ranks'
spools into this node's store partition, and serve Prometheus metrics at /metrics.

One agent per node and data directory. SIGTERM or SIGINT stops it cleanly: a last sample of
every collector, then everything into the store. Exit codes: 0 after a clean stop; 2 for bad
flags, a partition another process is writing (a second agent), or a port already in use.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.abc
import logging
import signal
import sys
import threading
import time

import pyarrow as pa
from prometheus_client import CollectorRegistry

from triage.agent.config import AgentConfig
from triage.agent.exporter import StateCollector
from triage.agent.metrics_server import MetricsServer
from triage.agent.node_agent import NodeAgent
from triage.collectors.gpu_backend import GpuConfig
from triage.collectors.host import HostConfig
from triage.collectors.kernel_log import KernelLogConfig
from triage.config import ConfigError, add_config_args, config_from_args
from triage.store import PartitionBusy, StoreError
from triage.store.config import StoreConfig

log = logging.getLogger("triage.agent")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, AgentConfig)
    add_config_args(parser, GpuConfig, skip=("gpu",))
    add_config_args(parser, KernelLogConfig)
    add_config_args(parser, HostConfig)
    add_config_args(parser, StoreConfig)
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="log verbosity on stderr (default: %(default)s)",
    )


def config_from(args: argparse.Namespace) -> AgentConfig:
    return config_from_args(
        AgentConfig,
        args,
        gpus=config_from_args(GpuConfig, args, gpu="none"),  # the backend comes from --gpu
        kernel=config_from_args(KernelLogConfig, args),
        host=config_from_args(HostConfig, args),
        store=config_from_args(StoreConfig, args),
    )


_M_ARENA_MAX = -8  # glibc malloc.h


class _WithoutPandas(importlib.abc.MetaPathFinder):
    """pyarrow imports pandas the first time it builds an array, only to ask whether its input
    is a pandas object. The agent never hands it one, and pandas would be ~35 MB of its RSS."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError(
                "pandas is kept out of `triage agent` (its memory budget); "
                "job analysis belongs in the supervisor or `triage analyze`"
            )
        return


def _lean_process() -> None:
    """An agent lives for months beside the training job, so its resident memory matters more
    than allocation speed: no pandas (see `_WithoutPandas`); Arrow allocates from the C heap
    instead of its own mimalloc arenas, and glibc keeps two arenas instead of eight per core
    for the agent's few threads (about 10 MB of peak RSS in `triage bench agent`)."""
    sys.meta_path.insert(0, _WithoutPandas())
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):  # not glibc: its default arenas it is
        pass


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = config_from(args)
    _lean_process()
    try:
        agent = NodeAgent(config)
    except PartitionBusy as exc:
        raise ConfigError(f"{exc}. Only one agent may run per node and data directory.") from None
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    try:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(StateCollector(agent.state))
        server = MetricsServer(registry, config.bind, config.port)
    except BaseException:
        agent.close()
        raise
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s; final collect and flush", signal.Signals(signum).name)
        stop.set()
        agent.wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: agent.ask_flush())
    agent.mark_flushed(time.time())
    log.info(
        "agent for node %s: data %s, GPUs %s, %d collector(s), serving %s",
        agent.node,
        agent.data_dir,
        agent.gpu_backend,
        len(agent.collectors),
        server.url,
    )
    try:
        agent.run(stop)
    finally:
        server.close()
        agent.close()
    log.info("agent stopped; store partition %s flushed", agent.writer.dir)
    return 0
