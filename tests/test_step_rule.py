"""The step-progress rule (`triage.supervisor.step_rule`): no step for the step timeout is a
hang, unless ranks work outside steps, and not in the moments after that work ends."""

from triage.supervisor.step_rule import StepState, StepWatch

LIMIT = 30.0


def test_no_step_past_the_timeout_is_a_hang_and_within_it_is_not():
    watch = StepWatch(prepare_timeout_s=900.0)
    assert watch.judge(1029.0, 1000.0, LIMIT, working=False) is StepState.RUNNING
    assert watch.judge(1031.0, 1000.0, LIMIT, working=False) is StepState.HUNG


def test_no_limit_means_the_rule_does_not_apply():
    """A job whose steps are not known to come is never stopped for their lack."""
    assert StepWatch(900.0).judge(99_999.0, 0.0, None, working=False) is StepState.RUNNING


def test_work_outside_steps_holds_the_rule_off_up_to_the_prepare_timeout():
    watch = StepWatch(prepare_timeout_s=900.0)
    assert watch.judge(1500.0, 1000.0, LIMIT, working=True) is StepState.WORKING
    assert watch.judge(1901.0, 1000.0, LIMIT, working=True) is StepState.HUNG


def test_the_step_after_the_work_gets_the_timeout_from_the_end_of_the_work():
    """Ten minutes of preparation end; the next step takes 20 s to run and reach the store.
    Counted from the last step, the job would be stopped at the first probe after the work;
    counted from the work's end, only once the timeout has passed since it."""
    watch = StepWatch(prepare_timeout_s=900.0)
    for t in range(1040, 1600, 2):  # working until 1598
        assert watch.judge(float(t), 1000.0, LIMIT, working=True) is StepState.WORKING
    assert watch.judge(1602.0, 1000.0, LIMIT, working=False) is StepState.RUNNING
    assert watch.judge(1628.0, 1000.0, LIMIT, working=False) is StepState.RUNNING
    assert watch.judge(1630.0, 1620.0, LIMIT, working=False) is StepState.RUNNING  # the step came
    assert watch.judge(1649.0, 1620.0, LIMIT, working=False) is StepState.RUNNING
    assert watch.judge(1651.0, 1620.0, LIMIT, working=False) is StepState.HUNG


def test_a_step_s_own_work_gives_no_wait_after_it():
    """Probes during a long step see its Python code as work; a hang after it is found at the
    timeout from the last step, with no grace for work that never held the rule off."""
    watch = StepWatch(prepare_timeout_s=900.0)
    for t in range(1002, 1030, 2):
        assert watch.judge(float(t), 1000.0, LIMIT, working=True) is StepState.RUNNING
    assert watch.judge(1031.0, 1000.0, LIMIT, working=False) is StepState.HUNG


def test_work_past_the_prepare_timeout_is_a_hang_even_as_it_ends():
    watch = StepWatch(prepare_timeout_s=300.0)
    assert watch.judge(1200.0, 1000.0, LIMIT, working=True) is StepState.WORKING
    assert watch.judge(1300.0, 1000.0, LIMIT, working=True) is StepState.HUNG


def test_a_hang_after_the_work_is_still_found():
    watch = StepWatch(prepare_timeout_s=900.0)
    assert watch.judge(1100.0, 1000.0, LIMIT, working=True) is StepState.WORKING
    assert watch.judge(1129.0, 1000.0, LIMIT, working=False) is StepState.RUNNING
    assert watch.judge(1131.0, 1000.0, LIMIT, working=False) is StepState.HUNG
