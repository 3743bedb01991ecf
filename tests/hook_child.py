"""A minimal observed training process for the hook tests (run as a subprocess).

argv: data_dir mode steps [step_sleep_s [flush_interval_s]]; mode is "clean", "raise" or "forever".
Prints each finished step on stdout so the parent knows how far it got.
"""

import sys
import time

import torch

from triage.trainer_hooks import MonitorConfig, TrainingMonitor


def main() -> None:
    data_dir, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    every = float(sys.argv[5]) if len(sys.argv) > 5 else 0.2
    model = torch.nn.Linear(4, 4)
    mon = TrainingMonitor(
        MonitorConfig(
            data_dir=data_dir,
            job_id="child",
            flush_interval_s=every,
            heartbeat_interval_s=every,
            canary_every=0,
        ),
        model=model,
    )
    mon.start()
    step = 0
    while mode == "forever" or step < steps:
        with mon.step(step, tokens=16, samples=4) as s:
            with s.compute():
                loss = model(torch.ones(4, 4)).sum()
            s.record(loss=float(loss))
        print(step, flush=True)
        if mode == "raise" and step == steps - 1:
            raise KeyError("missing_field")
        time.sleep(pause)
        step += 1
    mon.close()


if __name__ == "__main__":
    main()
