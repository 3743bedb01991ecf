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
from triage.reference_trainer.train_config import TrainConfig, rank_attempt_from_env


@record
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="triage.reference_trainer.worker")
    parser.add_argument("--config", required=True, help="TrainConfig as JSON")
    args = parser.parse_args(argv)
    cfg = TrainConfig.from_json(args.config)
    device = init_distributed(max(cfg.startup_timeout, cfg.collective_timeout))
    trainer = Trainer(cfg, attempt=rank_attempt_from_env(), device=device)
    try:
        trainer.run()
    except SystemExit as exc:  # preemption: the checkpoint is saved, exit with its code
        if trainer.monitor is not None:
            trainer.monitor.close(exit_code=exc.code if isinstance(exc.code, int) else 1)
        raise
    except BaseException as exc:
        # Recorded here, not only by the excepthook: torchrun's @record re-raises, but the
        # interpreter may be torn down by a peer's SIGTERM before the hook runs.
        if trainer.monitor is not None:
            trainer.monitor.record_exception(exc)
            trainer.monitor.close(exit_code=1)
        raise
    if trainer.monitor is not None:
        trainer.monitor.close(exit_code=0)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
