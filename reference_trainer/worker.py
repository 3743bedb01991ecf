"""The per-rank entry point torchrun starts: `python -m triage.reference_trainer.worker --config JSON`.

`@record` writes the rank's exception to torchrun's error file, so torchrun's failure report
names the rank and error that ended the job.
"""

from __future__ import annotations

import argparse
import sys

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from triage.reference_trainer.loop import Trainer, init_distributed
from triage.reference_trainer.train_config import TrainConfig, attempt_from_env


@record
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="triage.reference_trainer.worker")
    parser.add_argument("--config", required=True, help="TrainConfig as JSON")
    args = parser.parse_args(argv)
    cfg = TrainConfig.from_json(args.config)
    device = init_distributed(cfg.collective_timeout)
    Trainer(cfg, attempt=attempt_from_env(), device=device).run()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
