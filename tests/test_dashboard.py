"""The dashboard: its data shaping, every page under AppTest, and `triage dashboard`'s checks."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from dashboard_store import JOB, LEMON, OK_JOB, write_fault_store
from jobdata_builder import T0
from streamlit.testing.v1 import AppTest

from triage.cli import main
from triage.commands.dashboard import APP, streamlit_command
from triage.config import ENV_DATA_DIR, ConfigError
from triage.dashboard import charts, queries, shaping
from triage.dashboard.config import DashboardConfig
from triage.display import action_text, culprit_text, status_colour, when
from triage.store import ingest_spools


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return write_fault_store(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def job_view(store):
    return queries.read_job(str(store), JOB, time.time())


# -- shaping ----------------------------------------------------------------------------------


def test_fleet_lists_jobs_incidents_and_marks_the_quarantined_node(store):
    f = queries.read_fleet(str(store), time.time(), max_jobs=20)
    assert set(f.jobs["job_id"]) == {JOB, OK_JOB}
    (inc,) = f.incidents.to_dict("records")
    assert (inc["job_id"], inc["category"], inc["layer"], inc["root_cause"]) == (
        JOB,
        "gpu_fallen_off_bus",
        "gpu",
        True,
    )
    assert inc["culprit"] == "rank 3 on node1, GPU 1 (GPU-node1-1)"  # triage.display.culprit_text
    nodes = f.nodes.set_index("node")
    assert nodes.loc["node1", "quarantined"] == "GPU 1: gpu_fallen_off_bus on node1"
    assert nodes.loc["node0", "quarantined"] == "" and nodes.loc["node1", "excluded_by_job"] == JOB
    gpus = f.gpus.set_index(["node", "gpu"])
    assert gpus.loc[("node1", 1), "health"] == "lost"
    assert gpus.loc[("node0", 0), "health"] == "ok"  # a power cap is by design, not ill health


def test_a_node_returned_to_service_is_no_longer_marked(tmp_path):
    """After `triage nodes clear`, `triage nodes` said no node was quarantined while the Fleet
    page still showed the nodes EXCLUDED and their GPUs flagged `xid` (a trial). The page's
    node state is the ledger's; a GPU's Xids count from its return to service."""
    from triage.store.node_health import clear_node

    store = write_fault_store(tmp_path)  # its own: the clear must not reach the other tests
    now = T0 + 300  # the fixture's Xid is within the page's day of Xids
    before = queries.read_fleet(str(store), now, max_jobs=20)
    assert before.gpus.set_index(["node", "gpu"]).loc[("node1", 1), "xids"] == 1
    clear_node(store, "node1", by="test", now=T0 + 250)
    f = queries.read_fleet(str(store), now, max_jobs=20)
    nodes = f.nodes.set_index("node")
    assert nodes.loc["node1", "quarantined"] == ""
    assert nodes.loc["node1", "excluded_by_job"] == JOB  # history stays
    assert f.gpus.set_index(["node", "gpu"]).loc[("node1", 1), "xids"] == 0


def test_fleet_analyses_only_the_newest_jobs(store):
    f = queries.read_fleet(str(store), time.time(), max_jobs=1)
    analysed = f.jobs.dropna(subset=["goodput_ratio"])
    assert len(analysed) == 1 and len(f.jobs) == 2


def test_job_markers_put_incident_restart_and_checkpoint_on_one_axis(job_view):
    m = shaping.job_markers(job_view)
    assert list(m["kind"]) == ["checkpoint", "incident", "restart"]
    assert m["time"].is_monotonic_increasing
    assert "gpu_fallen_off_bus" in m.loc[m["kind"] == "incident", "label"].iloc[0]


def test_goodput_frame_holds_productive_time_and_each_nonzero_bucket(job_view):
    g = job_view.analysis.goodput
    f = shaping.goodput_frame(g)
    assert f.iloc[0]["bucket"] == "productive" and f.iloc[0]["seconds"] == pytest.approx(g.productive_s)
    assert set(f["bucket"][1:]) == {k for k, v in g.badput.items() if v > 0}
    assert f["seconds"].sum() == pytest.approx(g.productive_s + sum(g.badput.values()))


def test_incident_detail_says_what_the_supervisor_did_and_how_it_ended(job_view):
    d = shaping.incident_detail(job_view, 0)
    assert d.verdict["category"] == "gpu_fallen_off_bus" and d.root_cause
    assert d.action_taken == (
        "restart from the last checkpoint without node1 (supervisor, for gpu_fallen_off_bus)"
    )
    assert d.culprit == culprit_text(d.verdict["culprit"]) == "rank 3 on node1, GPU 1 (GPU-node1-1)"
    assert d.result == "attempt 1 completed, steps 6-15"
    assert any(c.startswith("collective_timeout") for c in d.consequences)
    assert not d.evidence.empty and "Xid" in " ".join(d.evidence["text"])


def test_incident_without_a_supervisor_record_names_the_recommended_action(job_view):
    view = queries.JobView(
        job_view.job_id,
        job_view.analysis,
        job_view.data,
        job_view.steps,
        job_view.checkpoints,
        job_view.supervisor_incidents.iloc[0:0],
    )
    assert shaping.incident_detail(view, 0).action_taken == (
        "none recorded by the supervisor (recommended: "
        "restart from the last checkpoint without the culprit's node)"
    )


def _with_supervisor_action(view: queries.JobView, action: str) -> queries.JobView:
    """The view as if the supervisor had taken `action` on the incident (it records the
    culprit's node, node1, with every action)."""
    sup = view.supervisor_incidents.assign(action=action)
    return dataclasses.replace(view, supervisor_incidents=sup)


@pytest.mark.parametrize("action", ["fail_fast", "restart", "checkpoint_and_requeue"])
def test_an_action_that_excludes_nobody_names_no_excluded_node(job_view, action):
    view = _with_supervisor_action(job_view, action)
    assert view.supervisor_incidents["culprit_node"].tolist() == ["node1"]
    taken = shaping.incident_detail(view, 0).action_taken
    assert taken == f"{action_text(action)} (supervisor, for gpu_fallen_off_bus)"
    assert "excluding" not in taken and "node1" not in taken


def test_restart_excluding_node_names_the_node_left_out(job_view):
    view = _with_supervisor_action(job_view, "restart_excluding_node")
    taken = shaping.incident_detail(view, 0).action_taken
    assert taken.startswith(action_text("restart_excluding_node", ["node1"]))
    assert "without node1" in taken


# -- fleet reliability ------------------------------------------------------------------------


def test_reliability_of_a_generated_fleet_flags_its_lemon_and_adds_up(tmp_path):
    from triage.benchmarks.fleet_history import FleetSpec, generate_fleet

    now = time.time()
    truth = generate_fleet(tmp_path, FleetSpec(jobs=1000, nodes=50, lemons=1, seed=1, end=now))
    view = queries.read_reliability(str(tmp_path), now, "7d")
    r = view.report
    assert view.accounted_runs == r.runs == 1000 and r.failures > 0
    lemons = shaping.lemon_frame(r)
    assert list(lemons["node"]) == truth.lemons
    assert list(lemons.columns) == ["node", "failures", "expected", "rate_ratio", "p_value", "evidence"]
    (lemon,) = lemons.to_dict("records")
    assert lemon["failures"] > lemon["expected"] and lemon["p_value"] < 0.01
    assert lemon["evidence"].startswith(f"culprit of {lemon['failures']} failures")
    by_cause = shaping.lost_by_category_frame(r)
    assert by_cause["gpu_h"].sum() == pytest.approx(r.lost_gpu_h) and r.lost_gpu_h > 0
    assert by_cause["gpu_h"].is_monotonic_decreasing and by_cause["share"].sum() == pytest.approx(1.0)
    assert by_cause.set_index("category").loc["user_code_error", "layer"] == "application"
    by_node = shaping.lost_by_node_frame(r)
    assert len(by_node) == queries.RELIABILITY_TOP and by_node["gpu_h"].is_monotonic_decreasing
    sizes = shaping.by_size_frame(r)
    assert sizes["runs"].sum() == r.runs and sizes["failures"].sum() == r.failures
    assert view.report.failures_per_1000_node_days == pytest.approx(r.failures / r.node_days * 1000)
    assert sizes["failures"].all()  # so the fleet's MTTF is every size's wall time per failure:
    assert view.report.mttf_h == pytest.approx((sizes["mttf_h"] * sizes["failures"]).sum() / r.failures)


def test_reliability_counts_the_attempts_that_started_in_the_window(store):
    """`write_fleet_history`: 13 runs in the last 7 days (5 failures on the lemon), 2 in the
    last 24 h, a 14th 8.3 days ago; each ran 9 h but the one a user's bug failed fast (1 h)."""
    week = queries.read_reliability(str(store), time.time(), "7d")
    r = week.report
    assert (r.runs, r.failures, week.accounted_runs) == (13, 8, 14)
    assert r.allocated_gpu_h == pytest.approx(10 * 8 * 9 + 8 * 1 + 2 * 16 * 9)
    assert week.report.wall_h == pytest.approx(12 * 9 + 1) and week.report.mttf_h == pytest.approx(109 / 8)
    assert list(shaping.lemon_frame(r)["node"]) == [LEMON]
    assert shaping.lost_by_node_frame(r).iloc[0]["node"] == LEMON
    assert list(shaping.by_size_frame(r)["size"]) == ["1-8", "9-64"]
    day = queries.read_reliability(str(store), time.time(), "24h")
    assert (day.report.runs, day.report.failures) == (2, 1) and shaping.lemon_frame(day.report).empty
    for window in ("30d", "all"):
        assert queries.read_reliability(str(store), time.time(), window).report.runs == 14
    with pytest.raises(KeyError):
        queries.read_reliability(str(store), time.time(), "1y")


def test_lost_gpu_hours_chart_draws_each_cause_in_its_layers_colour(store):
    frame = shaping.lost_by_category_frame(queries.read_reliability(str(store), time.time(), "7d").report)
    spec = charts.lost_gpu_hours_chart(frame).to_dict()
    assert spec["mark"]["type"] == "bar"
    enc = spec["encoding"]
    assert (enc["y"]["field"], enc["x"]["field"], enc["color"]["field"]) == ("category", "gpu_h", "layer")
    assert enc["x"]["title"] == "lost GPU-hours (GPU·h)"
    scale = enc["color"]["scale"]
    assert scale["range"][scale["domain"].index("gpu")] == "#d62728"  # the same whatever the window
    assert enc["color"]["legend"]["values"] == ["application", "communication", "gpu", "host", "overhead"]
    rows = {r["category"]: r for r in _rows(spec)}
    assert rows[LEMON_CAUSE]["layer"] == "gpu" and rows["overhead"]["layer"] == "overhead"
    assert sum(r["gpu_h"] for r in rows.values()) == pytest.approx(frame["gpu_h"].sum())


LEMON_CAUSE = "gpu_memory_error"


# -- charts: every time axis is UTC with readable labels ----------------------------------------


def _time_encodings(spec: object) -> list[dict]:
    """Every encoding channel of a Vega-Lite spec that draws a temporal field."""
    found = []
    if isinstance(spec, dict):
        if spec.get("type") == "temporal" and "field" in spec:
            found.append(spec)
        for v in spec.values():
            found += _time_encodings(v)
    elif isinstance(spec, list):
        for v in spec:
            found += _time_encodings(v)
    return found


def _assert_utc_time_axes(spec: dict, fmt: str = "%H:%M:%S") -> None:
    axes = _time_encodings(spec)
    assert axes, "no time axis"
    for x in axes:
        assert x["scale"] == {"type": "utc"}, x
        assert x["axis"]["format"] == fmt, x  # never Vega's default `.760` millisecond ticks
        assert x["title"] == "time (UTC)", x


def _rows(spec: dict) -> list[dict]:
    return [r for rows in spec["datasets"].values() for r in rows]


def test_time_charts_have_a_utc_axis_and_show_times_as_display_writes_them(job_view):
    steps = job_view.steps
    markers = shaping.job_markers(job_view)
    spec = charts.step_timeline(steps, markers, "tokens_per_s", "throughput").to_dict()
    _assert_utc_time_axes(spec)
    first = steps.iloc[0]
    row = next(r for r in _rows(spec) if r.get("step") == first["step"] and r.get("attempt") == 0)
    # an instant with its offset, so neither altair nor Streamlit reads it as the browser's zone
    assert row["time"] == pd.Timestamp(first["end"], unit="s", tz="UTC").isoformat()
    assert row["time"].endswith("+00:00")
    assert row["time_utc"] == when(first["end"])  # the tooltip's time, as every page writes it
    series = pd.DataFrame({"time": [1.7e9, 1.7e9 + 0.76], "gpu": [0, 0], "power_watts": [300.0, 310.0]})
    _assert_utc_time_axes(charts.gpu_metric(series, "power_watts", "power (W)").to_dict())
    fleet = queries.incident_table(job_view.analysis)
    _assert_utc_time_axes(charts.incidents_over_time(fleet).to_dict(), "%m-%d %H:%M")


def test_open_incidents_close_once_the_job_completes(job_view):
    assert queries.open_incidents(job_view.analysis) == []
    failed = job_view.analysis
    only_first = dataclasses.replace(failed, status="failed", attempts=failed.attempts[:1])
    assert queries.open_incidents(only_first) == [0]


def test_rank_grid_bins_steps_to_bound_the_heatmap():
    assert queries.step_bin(100, 4) == 1
    assert queries.step_bin(2000, 1024, max_cells=20_000) == 106  # 19 columns of <= 106 steps
    assert 1024 * -(-2000 // queries.step_bin(2000, 1024)) <= 20_000


def test_clock_events_keep_reasons_and_flag_the_health_ones():
    series = pd.DataFrame(
        {"time": [1.0, 2.0, 3.0], "gpu": [0, 0, 1], "clock_event_reasons": [0x1, 0x4 | 0x40, None]}
    )
    pts = shaping.clock_event_points(series)
    assert list(zip(pts["reason"], pts["health"])) == [("sw_power_cap", False), ("hw_thermal", True)]
    assert queries.gpu_health_word({"gpu_up": True, "clock_event_reasons": 0x40}) == "throttled"
    assert queries.gpu_health_word({"gpu_up": True, "clock_event_reasons": 0x4}) == "ok"


def test_rank_grid_and_bandwidth_read_the_attempt(store):
    grid, bins = queries.read_rank_grid(str(store), JOB, 0)
    assert bins == 1 and set(grid["rank"]) == {0, 1, 2, 3} and grid["step"].max() == 9
    bw = queries.read_bandwidth(str(store), JOB, 0)
    assert list(bw["op"]) == ["all_reduce"] and bw["busbw_gb_per_s"].iloc[0] == pytest.approx(41.5)


def test_damaged_manifest_is_reported_and_the_rest_shown(tmp_path):
    write_fault_store(tmp_path)
    (tmp_path / "store" / "node0" / "MANIFEST.json").write_text("{not json")
    view = queries.read_fleet(str(tmp_path), time.time(), 20)
    (problem,) = view.problems
    assert "partition node0 skipped" in problem and "MANIFEST.json is damaged" in problem
    assert "node0" not in set(view.gpus["node"]) and not view.gpus.empty  # node1's GPUs show


def test_the_dashboard_has_no_status_colours_culprit_text_or_time_format_of_its_own():
    """triage.display is the one definition (issue 19): no second colour map, culprit
    formatter or local-time formatter may grow back in the dashboard."""
    for path in Path(charts.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "STATUS_COLORS" not in text, path.name
        assert not re.search(r'"(running|completed|failed|hung|preempted)"\s*:', text), path.name
        assert "def culprit_text" not in text and "def _when" not in text, path.name
        assert "strftime(" not in text and "fromtimestamp(" not in text, path.name


# -- pages under AppTest ------------------------------------------------------------------------


def _app(data_dir: Path, monkeypatch, **params: str) -> AppTest:
    monkeypatch.setenv(ENV_DATA_DIR, str(data_dir))
    at = AppTest.from_file(str(APP), default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def _text(at: AppTest) -> str:
    parts = [
        e.value
        for kind in ("header", "markdown", "caption", "info", "success", "warning", "error")
        for e in getattr(at, kind)
    ]
    parts += [str(m.label) + " " + str(m.value) for m in at.metric]
    return "\n".join(str(p) for p in parts)


def _charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart"))


def _specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def _chart_data(at: AppTest, index: int) -> pd.DataFrame:
    """The frame Streamlit sent with the page's `index`th chart (apart from its spec)."""
    import pyarrow as pa

    (dataset,) = at.get("vega_lite_chart")[index].proto.datasets
    return pa.ipc.open_stream(dataset.data.data).read_all().to_pandas()


def _status_styles(at: AppTest, table: int = 0) -> str:
    """The CSS the page gives a dataframe's cells (its status column's colours)."""
    return str(at.dataframe[table].proto.arrow_data.styler.styles)


def test_fleet_page_shows_jobs_incidents_and_nodes(store, monkeypatch):
    at = _app(store, monkeypatch)
    assert not at.exception
    jobs = at.dataframe[0].value
    assert set(jobs["job_id"]) == {JOB, OK_JOB}
    text = _text(at)
    assert "gpu_fallen_off_bus" in text and "root cause" in text
    assert _charts(at) == 3  # incidents over time, incident counts, lost GPU-hours by cause
    nodes = at.dataframe[1].value.set_index("node")
    assert (
        "gpu_fallen_off_bus" in nodes.loc["node1", "quarantined"] and nodes.loc["node0", "quarantined"] == ""
    )
    assert set(jobs["status"]) == {"completed"}
    assert f"color: {status_colour('completed')}" in _status_styles(at)  # triage.display's colour
    f = queries.read_fleet(str(store), time.time(), max_jobs=20).jobs.set_index("job_id")
    shown = jobs.set_index("job_id")["last_progress"]
    assert shown[JOB] == when(f.loc[JOB, "last_progress"]) and shown[JOB].endswith(" UTC")
    (over_time, _counts, _lost) = _specs(at)
    _assert_utc_time_axes(over_time, "%m-%d %H:%M")


def _metrics(at: AppTest) -> dict[str, str]:
    return {str(m.label): str(m.value) for m in at.metric}


def test_fleet_page_shows_reliability_over_the_window_in_the_url(store, monkeypatch):
    at = _app(store, monkeypatch)
    assert not at.exception
    assert "Reliability" in [h.value for h in at.subheader]
    assert at.selectbox(key="fleet_window").value == "7d"  # the default
    m = _metrics(at)
    assert m["allocated (GPU·h)"] == "1,016.0" and m["MTTF"] == "13.6 h"
    week = queries.read_reliability(str(store), time.time(), "7d")
    assert m["ETTR"] == f"{week.report.ettr:.1%}" and m["lost (GPU·h)"] == f"{week.report.lost_gpu_h:,.1f}"
    assert m["failures / 1000 node-days"] == f"{week.report.failures_per_1000_node_days:,.0f}"
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith(f"Lemon node: {LEMON}")
    lost_by_node, lemons, sizes = (d.value for d in at.dataframe[3:6])
    assert lost_by_node.iloc[0]["node"] == LEMON and len(lost_by_node) <= 10
    assert list(lemons["node"]) == [LEMON] and lemons.iloc[0]["failures"] == 5
    assert "5 failures" in lemons.iloc[0]["evidence"]
    assert list(sizes.columns) == ["size", "runs", "failures", "ettr", "mttf_h", "mttr_s"]
    assert _specs(at)[2]["encoding"]["x"]["field"] == "gpu_h"
    drawn = _chart_data(at, 2)
    assert drawn.iloc[0]["category"] == "overhead" and LEMON_CAUSE in set(drawn["category"])
    assert drawn["gpu_h"].sum() == pytest.approx(week.report.lost_gpu_h)

    at.selectbox(key="fleet_window").set_value("24h").run()  # the URL follows the choice
    assert not at.exception and at.query_params["window"] == "24h"
    assert not at.warning and any(s.value.startswith("No lemon nodes") for s in at.success)
    assert "2 runs of 2 jobs" in _text(at)

    at = _app(store, monkeypatch, window="30d")  # ... and the choice follows the URL
    assert at.selectbox(key="fleet_window").value == "30d" and "14 runs of 14 jobs" in _text(at)
    at = _app(store, monkeypatch, window="](http://x)")
    assert not at.exception and at.selectbox(key="fleet_window").value == "7d"


def test_fleet_page_without_accounting_says_how_to_get_it(tmp_path, monkeypatch):
    from dashboard_store import fault_job

    fault_job().write_store(tmp_path)
    at = _app(tmp_path, monkeypatch)
    assert not at.exception
    (info,) = [i.value for i in at.info]
    assert "No reliability accounting" in info and "`triage run`" in info
    assert "`triage report --backfill`" in info
    assert "ETTR" not in _metrics(at) and _charts(at) == 2


def test_fleet_to_incident_in_one_click(store, monkeypatch):
    at = _app(store, monkeypatch)
    at.button(key=f"fleet-{JOB}-0").click().run()
    assert not at.exception
    assert (at.query_params["page"], at.query_params["job"]) == ("incident", JOB)
    assert at.header[0].value.startswith("gpu_fallen_off_bus")


def test_job_page_has_timelines_goodput_loss_and_incidents(store, monkeypatch):
    at = _app(store, monkeypatch, page="job", job=JOB)
    assert not at.exception
    assert at.header[0].value.startswith(f"Job {JOB}")
    assert _charts(at) == 5  # throughput, step time, goodput, loss, grad norm
    text = _text(at)
    assert "gpu_fallen_off_bus" in text and "goodput" in text
    status = next(m for m in at.markdown if m.value.startswith("**status**"))
    assert status.proto.allow_html and f"color: {status_colour('completed')}" in status.value
    assert ">completed</span>" in status.value
    attempts = at.dataframe[0].value
    assert list(attempts["status"]) == ["failed", "completed"]
    styles = _status_styles(at)
    assert f"color: {status_colour('failed')}" in styles and f"color: {status_colour('completed')}" in styles
    assert attempts.iloc[0]["start"] == when(_first_attempt_start(store))
    throughput, step_time = _specs(at)[:2]
    _assert_utc_time_axes(throughput)
    _assert_utc_time_axes(step_time)


def test_ranks_page_has_both_heatmaps_and_bandwidth(store, monkeypatch):
    at = _app(store, monkeypatch, page="ranks", job=JOB)
    assert not at.exception
    assert _charts(at) == 3
    assert at.selectbox(key="attempt").value == 1  # the newest attempt first
    at.selectbox(key="attempt").set_value(0).run()
    assert not at.exception and _charts(at) == 3


def test_gpu_page_shows_the_xid_on_the_culprit_node(store, monkeypatch):
    at = _app(store, monkeypatch, page="gpu", job=JOB)
    assert not at.exception
    at.selectbox(key="gpu_node").set_value("node1").run()
    assert not at.exception
    xids = at.dataframe[-1].value
    assert list(xids["xid"]) == [79]
    assert xids["time"].iloc[0].endswith(" UTC")
    assert _charts(at) >= 6
    for spec in _specs(at):
        _assert_utc_time_axes(spec)


def test_incident_page_shows_verdict_evidence_consequences_and_action(store, monkeypatch):
    at = _app(store, monkeypatch, page="incident", job=JOB, incident="0")
    assert not at.exception
    text = _text(at)
    for expected in (
        "gpu_fallen_off_bus",
        "gpu",
        "rank 3 on node1, GPU 1",
        "**taken**: restart from the last checkpoint without node1",
        "**recommended**: restart from the last checkpoint without the culprit's node "
        "(`restart_excluding_node`)",
        "attempt 1 completed",
        "collective_timeout",
    ):
        assert expected in text, expected
    assert "excluding node1" not in text
    evidence = at.dataframe[0].value
    assert "Xid" in " ".join(evidence["text"])
    assert all(t.endswith(" UTC") for t in evidence["time"])


def _first_attempt_start(store: Path) -> float | None:
    return queries.read_job(str(store), JOB, time.time()).analysis.attempts[0].start


def test_a_fail_fast_incident_reads_in_words_and_excludes_nobody(tmp_path, monkeypatch):
    """The supervisor records the culprit's node with every action; only a restart without
    it names it as left out (this page once said `fail_fast excluding node1`)."""
    from dashboard_store import XID_TIME, fault_job

    from triage.store import StoreWriter

    fault_job().write_store(tmp_path)
    with StoreWriter(tmp_path, "node0") as w:
        w.append_rows(
            "incidents",
            [
                dict(
                    job_id=JOB,
                    attempt=0,
                    time=XID_TIME + 30,
                    category="gpu_fallen_off_bus",
                    layer="gpu",
                    action="fail_fast",
                    confidence=0.95,
                    summary="GPU 1 of node1 fell off the bus",
                    culprit_rank=3,
                    culprit_node="node1",
                    culprit_gpu=1,
                    culprit_uuid="GPU-node1-1",
                    first_seen=XID_TIME,
                    verdict="{}",
                )
            ],
        )
    at = _app(tmp_path, monkeypatch, page="incident", job=JOB, incident="0")
    assert not at.exception
    text = _text(at)
    assert f"**taken**: {action_text('fail_fast')} \\(supervisor, for gpu_fallen_off_bus\\)" in text
    taken = text.split("**taken**")[1].split("\n")[0]
    assert "excluding" not in taken and "node1" not in taken and "fail_fast" not in taken


def test_unknown_job_is_a_message(store, monkeypatch):
    at = _app(store, monkeypatch, page="job", job="nope")
    assert not at.exception
    assert "No job `nope`" in at.warning[0].value


def test_empty_store_says_what_to_run(tmp_path, monkeypatch):
    for page in ("fleet", "job", "incident"):
        at = _app(tmp_path, monkeypatch, page=page)
        assert not at.exception
        assert "triage demo" in _text(at), page


def test_corrupt_store_and_missing_dir_are_messages_not_tracebacks(tmp_path, monkeypatch):
    write_fault_store(tmp_path)
    (tmp_path / "store" / "node0" / "MANIFEST.json").write_text("{not json")
    at = _app(tmp_path, monkeypatch)  # the rest of the store shows, with a warning
    assert not at.exception and "Left out of this view" in at.warning[0].value
    assert "partition node0 skipped" in at.code[0].value and at.dataframe
    at = _app(tmp_path / "missing", monkeypatch)
    assert not at.exception and "does not exist" in at.error[0].value


@pytest.mark.slow
def test_a_real_run_with_an_injected_exception_shows_its_culprit(tmp_path, monkeypatch):
    data = tmp_path / "data"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "train",
            "--nnodes",
            "2",
            "--nproc-per-node",
            "2",
            "--steps",
            "6",
            "--model",
            "tiny",
            "--inject",
            "exception@step=3,rank=1",
            "--job-id",
            "real-job",
            "--data-dir",
            str(data),
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode != 0, run.stdout[-2000:]  # the injected exception failed the run
    assert ingest_spools(data).total_rows > 0
    at = _app(data, monkeypatch)
    assert not at.exception
    assert list(at.dataframe[0].value["job_id"]) == ["real-job"]
    assert "real-job attempt 0 — user_code_error" in _text(at).replace("**", "")
    at = _app(data, monkeypatch, page="incident", job="real-job")
    assert not at.exception
    assert at.header[0].value.startswith("user_code_error")
    assert "culprit** rank 1 on node0" in _text(at)


# -- the command ------------------------------------------------------------------------------


def test_command_runs_streamlit_headless_without_telemetry():
    cmd = streamlit_command(DashboardConfig(port=8600))
    flags = dict(zip(cmd[5::2], cmd[6::2]))
    assert cmd[2:5] == ["streamlit", "run", str(APP)] and APP.is_file()
    assert flags["--server.headless"] == "true" and flags["--browser.gatherUsageStats"] == "false"
    assert flags["--server.address"] == "127.0.0.1" and flags["--server.port"] == "8600"


def test_missing_data_dir_and_busy_port_exit_2(tmp_path, capsys):
    assert main(["dashboard", "--data-dir", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["dashboard", "--data-dir", str(tmp_path), "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


def test_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="--port"):
        DashboardConfig(port=0)
    with pytest.raises(ConfigError, match="--cache-ttl-s"):
        DashboardConfig(refresh_s=2, cache_ttl_s=5)
    env = DashboardConfig(data_dir="/x", refresh_s=7).to_env()
    back = DashboardConfig.from_env(env)
    assert (back.data_dir, back.refresh_s) == ("/x", 7.0)


HOSTILE = "KeyError: ![x](http://evil.example/i.png) [click](http://evil.example) :red[alarm] <b>x</b>"


def test_log_text_and_url_parameters_are_shown_as_text_never_markdown(tmp_path, monkeypatch):
    """A rank's exception message is shown as itself: no image, link, colour directive or
    HTML; a `?job=` that is no job id is not echoed."""
    from jobdata_builder import T0, JobBuilder

    b = JobBuilder("hostile").world(2, per_node=1)
    end = b.steps(0, range(3), T0 + 5)
    b.event(
        0,
        1,
        end + 0.5,
        "exception",
        HOSTILE,
        traceback=f'Traceback (most recent call last):\n  File "train.py", line 3\n{HOSTILE}',
    )
    for r in range(2):
        b.event(0, r, end + 1, "exit", "exit code 1", exit_code=1)
    b.write_store(tmp_path)
    at = _app(tmp_path, monkeypatch, page="incident", job="hostile")
    assert not at.exception
    summary = next(m.value for m in at.markdown if m.value.startswith(">"))
    assert "evil" in summary and "alarm" in summary  # the text is there ...
    for raw in ("![x](", "[click](", ":red[", "<b>"):
        assert raw not in summary  # ... with every Markdown construct escaped
    assert r"\!\[x\]\(http" in summary
    at = _app(tmp_path, monkeypatch, page="job", job="](http://url-param.example)")
    assert not at.exception and "url-param" not in _text(at)
    assert "names no valid job id" in " ".join(w.value for w in at.sidebar.warning)


def test_logs_page_shows_a_ranks_output_with_the_decisive_lines_marked(tmp_path, monkeypatch):
    from jobdata_builder import T0, JobBuilder

    from triage.store.layout import run_log_dir

    b = JobBuilder("plain", run_id="r1").world(4, per_node=2)
    b.steps(0, range(3), T0 + 5)
    b.write_store(tmp_path)
    log = run_log_dir(tmp_path, "plain", "r1") / "attempt-0.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "\n".join(
            [
                "[rank0]:step 0 loss 0.5",
                "[rank2]:step 0 loss 0.4",
                "[rank2]:ValueError: bad batch shape at step 1",
                "[rank0]:RuntimeError: Connection reset by peer",
                "<script>alert(1)</script>",
            ]
        )
        + "\n"
    )
    at = _app(tmp_path, monkeypatch, page="logs", job="plain")
    assert not at.exception
    lines = at.dataframe[0].value
    assert list(lines["line"]) == [1, 2, 3, 4, 5]
    assert list(lines["category"].fillna("")) == ["", "", "user_code_error", "network_error", ""]
    assert list(lines["symptom"].fillna("")) == ["", "", False, True, ""]
    at.selectbox(key="log_rank").set_value(2).run()
    assert list(at.dataframe[0].value["text"]) == [
        "[rank2]:step 0 loss 0.4",
        "[rank2]:ValueError: bad batch shape at step 1",
    ]
    at.checkbox(key="log_decisive").check().run()
    assert list(at.dataframe[0].value["line"]) == [3]
