"""Run the reference trainer: a small GPT sharded with FSDP2 over torchrun ranks, with sharded,
atomic, verified DCP checkpoints, automatic resume (also at another world size) and fault
injection.

Without --node-rank, --nnodes N starts N simulated nodes (node0, node1, ...) on loopback with
c10d rendezvous; on a real cluster run one `triage train --node-rank K --rdzv-endpoint HOST:PORT`
per node. gloo on CPU, NCCL on GPU. Every rank gets TRIAGE_JOB_ID, TRIAGE_ATTEMPT (from the
environment, default 0), TRIAGE_DATA_DIR and, for simulated nodes, TRIAGE_NODE.

Exit status: 0 the run completed; 143 it was preempted (SIGTERM) and its checkpoint is saved;
otherwise torchrun's non-zero status (1 when a rank failed); 2 bad flags or an unusable run dir.
--summary is written in every case.
"""

from __future__ import annotations

import argparse

from triage.config import add_config_args, config_from_args
from triage.reference_trainer.inject_spec import inject_help
from triage.reference_trainer.launcher import launch
from triage.reference_trainer.train_config import TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, TrainConfig)
    parser.epilog = inject_help()


def run(args: argparse.Namespace) -> int:
    return launch(config_from_args(TrainConfig, args))
