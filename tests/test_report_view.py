"""The supervisor's final report as `triage run` and `triage demo` print it."""

from rich.console import Console

from triage.commands.report_view import job_report_renderables
from triage.supervisor.report import AttemptReport, JobReport

T = 1_796_525_467.0  # 2026-12-06 02:51:07 UTC
VERDICT = {
    "category": "gpu_fallen_off_bus",
    "layer": "gpu",
    "action": "restart_excluding_node",
    "confidence": 0.99,
    "culprit": {"rank": 3, "node": "node1", "gpu": 1, "uuid": None},
    "first_seen": T + 10,
    "summary": "GPU 1 on node1 (rank 3) reported Xid 79: GPU fell off the bus",
    "evidence": [
        {
            "text": "NVRM: Xid (PCI:0000:2a:00): 79, GPU has fallen off the bus.",
            "source": "kernel_log",
            "time": T + 10,
        }
    ],
    "consequences": ["collective_timeout: rank 1 hung in all_gather", "network_error: rank 0"],
}


def _render(report: JobReport, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, force_terminal=False)
    for part in job_report_renderables(report):
        console.print(part)
    return console.export_text().splitlines()


def test_a_restart_without_a_node_names_the_node_it_left_out():
    report = JobReport("j", "r1", "/d", ["cmd"], status="completed", reason="attempt 1 completed")
    report.attempts = [
        AttemptReport(
            0,
            T,
            {"excluded_nodes": []},
            outcome="failed",
            detection="gpu_fault",
            verdict=VERDICT,
            action="restart_excluding_node",
            last_step=7,
        ),
        AttemptReport(1, T + 30, {"excluded_nodes": ["node1"]}, outcome="completed", last_step=30),
    ]
    report.excluded_nodes = ["node1"]
    lines = _render(report)
    assert max(len(line.rstrip()) for line in lines) <= 80
    text = "\n".join(lines)
    assert "restart from the last checkpoint without node1" in text
    assert "rank 3 on node1, GPU 1" in text and "02:51:17 kernel_log" in text
    assert "(+1 more)" in text  # the consequences folded to one line


def test_a_fail_fast_reads_as_a_stop_not_as_an_exclusion():
    verdict = {**VERDICT, "category": "user_code_error", "layer": "application", "action": "fail_fast"}
    report = JobReport("j", "r1", "/d", ["cmd"], status="failed", reason="a user bug")
    report.attempts = [
        AttemptReport(
            0,
            T,
            {"excluded_nodes": ["node0"]},
            outcome="failed",
            detection="rank_exit",
            verdict=verdict,
            action="fail_fast",
            reason="deterministic: a restart repeats it",
        )
    ]
    text = "\n".join(_render(report, width=120))
    assert "stop: a restart would only repeat this failure" in text
    assert "deterministic: a restart repeats it" in text
    assert "without node0" not in text and "excluding" not in text


def test_a_run_that_gave_up_says_no_restart_was_made():
    verdict = {**VERDICT, "category": "unknown", "layer": "-", "action": "restart"}
    report = JobReport("j", "r1", "/d", ["cmd"], status="gave_up", reason="--max-restarts 0 is used up")
    report.attempts = [
        AttemptReport(
            0,
            T,
            {"excluded_nodes": []},
            outcome="failed",
            detection="launcher_exit",
            verdict=verdict,
            action="restart",
            reason="restarting it as it was; but --max-restarts 0 is used up",
        )
    ]
    text = "\n".join(_render(report, width=120))
    assert "none: gave up (restart from the last checkpoint was due)" in text


def test_the_live_view_says_which_ranks_are_gone():
    from triage.commands.demo import _rank_states
    from triage.supervisor.observe import Progress
    from triage.supervisor.report import LiveState

    def live(seen, running):
        return LiveState(0, "running", Progress(), (), (), seen, running)

    assert _rank_states(live((), ())) == "-"
    assert _rank_states(live((0, 1, 2, 3), (0, 1, 2, 3))) == "4 running"
    assert _rank_states(live((0, 1, 2, 3), (0, 1, 2))) == "3 of 4 running; exited: 3"


def test_the_verdict_says_what_the_incident_cost_the_job():
    from test_analyzers_goodput import two_attempts

    from triage.analyzers.config import AnalyzerConfig
    from triage.analyzers.job_analysis import analyze_job
    from triage.commands.report_view import analysis_renderables

    analysis = analyze_job(two_attempts().load(), AnalyzerConfig())
    console = Console(width=200, record=True, force_terminal=False)
    for part in analysis_renderables(analysis):
        console.print(part)
    (cost,) = [line for line in console.export_text().splitlines() if line.startswith("cost")]
    # 31 s of the job on 2 GPUs: 15 s detection, 12 s redone, 2 s start-up, 2 s loading
    assert "31.0 s of the job (62 GPU-s)" in cost
    assert cost.index("detection and restart 15.0 s") < cost.index("progress redone 12.0 s")
    assert "checkpoint load 2.0 s" in cost


def test_a_hang_known_only_from_its_stopped_heartbeats_is_timed_from_its_last_step():
    # the ranks' last heartbeats are when the supervisor stopped them, after the hang was
    # detected: the fault began at the last step (a Slurm trial said "detected 241 ms after")
    verdict = {**VERDICT, "category": "unknown", "first_seen": T + 50.2}
    for last_step_end in (T + 5, T + 12):
        hung = AttemptReport(
            0,
            T,
            {},
            outcome="hung",
            detection="hang",
            detected_at=T + 50,
            verdict=verdict,
            last_progress=last_step_end,
        )
        assert hung.fault_at == last_step_end and hung.detect_s == T + 50 - last_step_end
    # evidence before the detection is the fault's own time
    seen = AttemptReport(
        0, T, {}, detection="hang", detected_at=T + 50, verdict={**VERDICT, "first_seen": T + 20}
    )
    assert seen.fault_at == T + 20
