"""Configuration shared by every component: the data directory, job identity, and the bridge
from one config dataclass per component to its CLI flags.

A component declares `@dataclass class FooConfig` whose fields carry `metadata={"help": ...}`
(and optionally `"choices"`, `"flag"`, `"repeatable"`), validates itself in `__post_init__` by
raising `ConfigError`, and the CLI builds its flags from it with `add_config_args` /
`config_from_args`, so a flag and its config field cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ENV_JOB_ID = "TRIAGE_JOB_ID"
#: The run: one `triage run` launch of a job (a job id names a job; launching it again is a new
#: run with its own attempts). Set by the supervisor for every process it starts.
ENV_RUN_ID = "TRIAGE_RUN_ID"
#: 128 + SIGTERM: how a preempted rank (and job) exits once its checkpoint is saved, as
#: schedulers expect
EXIT_PREEMPTED = 143
ENV_ATTEMPT = "TRIAGE_ATTEMPT"
ENV_DATA_DIR = "TRIAGE_DATA_DIR"
#: Node name of this process. Set by `triage train` for the simulated nodes it starts on one
#: machine (`node0`, `node1`, ...); on a real cluster it is unset and the host name is used.
ENV_NODE = "TRIAGE_NODE"
#: Set by the supervisor (`triage run`) for a restarted attempt: simulated nodes to leave out
#: (comma-separated names), resume from the newest checkpoint strictly before this step
#: (rollback), and steps whose batches the trainer skips (comma-separated).
ENV_EXCLUDE_NODES = "TRIAGE_EXCLUDE_NODES"
ENV_RESUME_BEFORE_STEP = "TRIAGE_RESUME_BEFORE_STEP"
ENV_SKIP_STEPS = "TRIAGE_SKIP_STEPS"
#: Set on each node of a `triage run --launcher slurm` step (`supervisor/slurm_node.py`): the
#: step's node count, this node's rank in it, the rendezvous endpoint, this node's address.
ENV_NNODES = "TRIAGE_NNODES"
ENV_NODE_RANK = "TRIAGE_NODE_RANK"
ENV_RDZV_ENDPOINT = "TRIAGE_RDZV_ENDPOINT"
ENV_LOCAL_ADDR = "TRIAGE_LOCAL_ADDR"
#: "1" where `triage run` instruments torchrun ranks without code in the script.
ENV_AUTO_HOOKS = "TRIAGE_AUTO_HOOKS"
DEFAULT_DATA_DIR = "./triage-data"


class ConfigError(ValueError):
    """Bad input from the user: the CLI prints it and exits 2."""


def data_dir_from_env(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--data-dir` wins, then `TRIAGE_DATA_DIR`, then `./triage-data` (docs/architecture.md)."""
    return Path(explicit or os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR)


def node_name() -> str:
    return os.environ.get(ENV_NODE) or socket.gethostname()


C = TypeVar("C", bound="DataclassInstance")


def _flag(f: dataclasses.Field[Any]) -> str:
    flag: str = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
    return flag


def _base_type(tp: Any) -> Any:
    """`int | None` -> int; `list[str]` -> list."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _base_type(args[0])
    return origin or tp


def add_config_args(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = ()) -> None:
    """Add one flag per field of the config dataclass `cls`."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init or f.metadata.get("cli") is False:
            continue
        tp = _base_type(hints[f.name])
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
        help_text = f.metadata.get("help", "")
        kwargs: dict[str, Any] = {"dest": f.name, "help": help_text}
        if tp is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
            kwargs["default"] = default
        elif tp is list or f.metadata.get("repeatable"):
            kwargs["action"] = "append"
            kwargs["default"] = None
            kwargs["metavar"] = f.metadata.get("metavar", "SPEC")
        else:
            kwargs["type"] = tp if tp in (int, float) else str
            kwargs["default"] = default
            if "choices" in f.metadata:
                kwargs["choices"] = f.metadata["choices"]
            if "metavar" in f.metadata:
                kwargs["metavar"] = f.metadata["metavar"]
        if default not in (None, "", [], False) and tp is not bool and "%(default)" not in help_text:
            kwargs["help"] = f"{help_text} (default: %(default)s)"
        parser.add_argument(_flag(f), **kwargs)


def config_from_args(cls: type[C], args: argparse.Namespace, **overrides: Any) -> C:
    """Build the config from parsed flags; validation errors surface as `ConfigError`."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in overrides:
            values[f.name] = overrides[f.name]
        elif hasattr(args, f.name):
            v = getattr(args, f.name)
            if v is None and f.default_factory is not dataclasses.MISSING:
                continue
            values[f.name] = v
    return cls(**values)
