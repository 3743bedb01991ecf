"""A step the hang rule had not seen yet when it ran out (the ranks' last second of records,
still in their buffers): the supervisor looks once more before it stops the attempt."""

from pathlib import Path

from triage.supervisor.agents import Agents
from triage.supervisor.config import SupervisorConfig
from triage.supervisor.observe import Progress
from triage.supervisor.supervisor import Supervisor
from triage.trainer_hooks.config import MonitorConfig
from triage.trainer_hooks.monitor import TrainingMonitor


def _supervisor(data_dir: Path) -> Supervisor:
    cfg = SupervisorConfig(job_id="late", data_dir=str(data_dir), agents="none")
    return Supervisor(cfg, ["true"])


def _monitor(sup: Supervisor, data_dir: Path) -> TrainingMonitor:
    cfg = MonitorConfig(
        data_dir=data_dir,
        job_id=sup.job_id,
        run_id=sup.run_id,
        attempt=0,
        rank=0,
        world_size=1,
        node="n1",
        flush_interval_s=1.0,
        capture_uncaught=False,
        collectives=False,
    )
    return TrainingMonitor(cfg).start()


def test_a_step_stored_as_the_limit_ran_out_is_found_and_none_is_not_invented(tmp_path):
    sup = _supervisor(tmp_path / "d")
    agents = Agents([], sup.data_dir, gpu="none", sim_gpus=0, interval_s=1.0)
    monitor = _monitor(sup, sup.data_dir)
    try:
        # no step yet: nothing is found, the hang stands
        assert sup._stepped_after_all(0, agents, Progress()) is None
        for step in (0, 1):
            with monitor.step(step):
                pass
        # recorded a moment ago, in the rank's buffer: the look waits out its flush
        fresh = sup._stepped_after_all(0, agents, Progress())
        assert fresh is not None and fresh.last_step == 1
        # a step the rule had seen already is no news
        assert sup._stepped_after_all(0, agents, fresh) is None
    finally:
        monitor.close()
