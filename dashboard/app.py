"""The Streamlit app `triage dashboard` serves: fleet, job, ranks, GPU health, incident and log
pages.

A page is addressable by URL (`?page=job&job=ID`, `?page=incident&job=ID&incident=0`), so a
link in an alert or a chat lands on it. The open page re-reads the store every `refresh_s`
through a fresh snapshot (cached for `cache_ttl_s`); all shaping lives in `queries`, `shaping`
and `charts`, and everything here only lays those out.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from triage.dashboard import charts, log_view, queries, shaping
from triage.dashboard.config import DashboardConfig
from triage.dashboard.queries import RELIABILITY_WINDOWS, FleetView, JobView, ReliabilityView, StoreUnreadable
from triage.display import Status, action_text, status_colour, when
from triage.names import is_valid_name

if TYPE_CHECKING:
    from streamlit.elements.lib.column_types import ColumnConfig

PAGES: dict[str, str] = {
    "fleet": "Fleet",
    "job": "Job",
    "ranks": "Ranks",
    "gpu": "GPU health",
    "incident": "Incident",
    "logs": "Logs",
}
CFG = DashboardConfig.from_env()


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _fleet(data_dir: str, max_jobs: int) -> FleetView:
    return queries.read_fleet(data_dir, time.time(), max_jobs)


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _reliability(data_dir: str, window: str) -> ReliabilityView:
    return queries.read_reliability(data_dir, time.time(), window)


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _job_ids(data_dir: str) -> list[str]:
    return queries.list_job_ids(data_dir, time.time())


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _job(data_dir: str, job_id: str) -> JobView:
    return queries.read_job(data_dir, job_id, time.time())


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _rank_grid(data_dir: str, job_id: str, attempt: int, run_id: str | None) -> tuple[pd.DataFrame, int]:
    return queries.read_rank_grid(data_dir, job_id, attempt, run_id)


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _bandwidth(data_dir: str, job_id: str, attempt: int, run_id: str | None) -> pd.DataFrame:
    return queries.read_bandwidth(data_dir, job_id, attempt, run_id)


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _gpu_series(data_dir: str, node: str, t0: float, t1: float) -> pd.DataFrame:
    return queries.read_gpu_series(data_dir, node, t0, t1)


@st.cache_data(ttl=CFG.cache_ttl_s, show_spinner=False)
def _log(
    data_dir: str, job_id: str, run_id: str, attempt: int, rank: int | None, decisive_only: bool
) -> pd.DataFrame:
    return log_view.read_attempt_log(
        data_dir, job_id, run_id, attempt, rank=rank, decisive_only=decisive_only
    )


def _data_dir(cfg: DashboardConfig) -> str:
    """`cfg.data_dir`, which `DashboardConfig.from_env` always fills in."""
    assert cfg.data_dir is not None
    return cfg.data_dir


def status_html(status: str) -> str:
    """A status word in its colour (`triage.display`'s, the CLI's too), for Markdown shown with
    `unsafe_allow_html`: Streamlit's `:color[...]` takes only named colours. A word rather than
    an emoji: headless browsers often lack emoji fonts."""
    return f'<span style="color: {status_colour(status)}; font-weight: 600">{html.escape(status)}</span>'


def status_styled(frame: pd.DataFrame, column: str = "status") -> pd.io.formats.style.Styler:
    """`frame` with each cell of `column` in its status's colour. A number column shown from a
    Styler takes the Styler's text (`4.000000` for a float) unless its column_config gives a
    format: see `_whole_numbers`."""
    style = frame.style
    if column not in frame.columns:
        return style
    return style.map(lambda s: f"color: {status_colour(str(s))}; font-weight: 600", subset=[column])


def _whole_numbers(*columns: str) -> dict[str, ColumnConfig]:
    """Columns of counts and steps, shown as `4` even where a missing value made them floats."""
    return {c: st.column_config.NumberColumn(c, format="%d") for c in columns}


def _go(page: str, **params: object) -> None:
    """Navigate within the app: the URL changes, so the view stays addressable."""
    st.query_params.clear()
    st.query_params.update({"page": page, **{k: str(v) for k, v in params.items()}})
    st.rerun()


def _open_buttons(incidents: pd.DataFrame, key: str) -> None:
    """One row per incident with a button that opens it: fleet -> incident in one click."""
    for r in incidents.itertuples():
        c1, c2 = st.columns([6, 1])
        root = " · **root cause**" if r.root_cause else ""
        c1.markdown(
            f"`{when(r.time)}` **{r.job_id}** attempt {r.attempt} — "
            f"**{r.category}** ({r.layer}){root}: {_md(r.summary[:160])}"
        )
        if c2.button("Open", key=f"{key}-{r.job_id}-{r.index}"):
            _go("incident", job=r.job_id, incident=r.index)


#: What Markdown or Streamlit acts on inside a line: links and images (`[`, `]`, `(`, `)`,
#: `!`), HTML (`<`, `>`), code, emphasis and strike-through, math (`$`), colour directives
#: (`:red[...]`, through its `[`), and word-edge underscores (`_x_`; `a_b` stays as it is).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]()!<>$~])|(?<!\w)_|_(?!\w)")


def _md(text: object) -> str:
    """`text` (a log line, an exception message) as inert Markdown on one line, so that a
    crafted message shows as itself, never as a link, an image, HTML or formatting."""
    return _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(0), str(text)).replace("\n", " ")


# -- pages ------------------------------------------------------------------------------------


def fleet_page(cfg: DashboardConfig, _job_id: str | None) -> None:
    st.header("Fleet")
    view = _fleet(_data_dir(cfg), cfg.max_jobs)
    for problem in view.problems:
        st.warning("Left out of this view: ", icon="⚠️")
        st.code(problem, language=None)
    if view.empty:
        msg = (
            f"No jobs in `{view.data_dir}` yet. Run `triage demo` to train a small job "
            "(or point `--data-dir` at where your agents write)."
        )
        if view.pending_spool_nodes:
            msg += (
                f" Spools of {', '.join(view.pending_spool_nodes)} wait to be ingested: start "
                "`triage agent` on those nodes or run `triage jobs` once."
            )
        st.info(msg)
        reliability_section(cfg, quiet=True)
        return
    jobs, inc, nodes = view.jobs, view.incidents, view.nodes
    cols = st.columns(6)
    cols[0].metric("jobs", len(jobs))
    cols[1].metric("running", int((jobs["status"] == Status.RUNNING).sum()))
    cols[2].metric(
        "failed, hung or gave up", int(jobs["status"].isin([s for s in Status if s.needs_attention]).sum())
    )
    cols[3].metric("open incidents", int(jobs["open_incidents"].fillna(0).sum()))
    cols[4].metric("nodes (quarantined)", f"{len(nodes)} ({int((nodes['quarantined'] != '').sum())})")
    cols[5].metric("GPUs not ok", f"{int((view.gpus['health'] != 'ok').sum())} of {len(view.gpus)}")

    st.subheader("Jobs")
    table = jobs.assign(
        last_progress=jobs["last_progress"].map(when),
        goodput=jobs["goodput_ratio"],
        link="?page=job&job=" + jobs["job_id"],
    )
    st.dataframe(
        status_styled(
            table[
                [
                    "job_id",
                    "status",
                    "attempts",
                    "ranks",
                    "max_step",
                    "goodput",
                    "open_incidents",
                    "last_progress",
                    "link",
                ]
            ]
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "goodput": st.column_config.ProgressColumn(
                "goodput", format="percent", min_value=0.0, max_value=1.0
            ),
            **_whole_numbers("attempts", "ranks", "open_incidents"),
            "max_step": st.column_config.NumberColumn("last step", format="%d"),
            "link": st.column_config.LinkColumn("page", display_text="open job"),
        },
    )

    st.subheader("Incidents")
    if inc.empty:
        st.success("No incidents in the analysed jobs.")
    else:
        left, right = st.columns([3, 2])
        left.altair_chart(charts.incidents_over_time(inc), width="stretch")
        right.altair_chart(charts.incident_counts(inc), width="stretch")
        st.caption("Newest incidents — open one to see its verdict, evidence and consequences")
        _open_buttons(inc.sort_values("time", ascending=False, na_position="last").head(10), "fleet")

    st.subheader("Nodes and GPUs")
    if nodes.empty:
        st.info("No node has reported yet.")
    else:
        st.dataframe(
            nodes.assign(
                excluded_by_job=nodes["excluded_by_job"].fillna(""),
                last_seen=nodes["last_seen"].map(when),
            ),
            hide_index=True,
            width="stretch",
        )
    if view.gpus.empty:
        st.info(
            "No GPU samples: start `triage agent` on the nodes (with `--gpu sim` where "
            "there is no GPU) to see GPU health here."
        )
    else:
        g = view.gpus.assign(last_sample=view.gpus["last_sample"].map(when))
        st.dataframe(
            g,
            hide_index=True,
            width="stretch",
            column_config={
                "temperature_celsius": st.column_config.NumberColumn("temp (°C)", format="%.0f"),
                "power_watts": st.column_config.NumberColumn("power (W)", format="%.0f"),
                "sm_clock_mhz": st.column_config.NumberColumn("SM clock (MHz)", format="%.0f"),
            },
        )
    reliability_section(cfg)


NO_ACCOUNTING = (
    "No reliability accounting in this store yet: runs started by `triage run` record it when "
    "they end, and `triage report --backfill` analyses older runs."
)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} h"


def reliability_section(cfg: DashboardConfig, quiet: bool = False) -> None:
    """ETTR, lost GPU-hours by cause and culprit node, lemon nodes and MTTF/MTTR by job size
    over the window the URL's `window` names (`analyzers.fleet` computes every figure).
    `quiet`: say nothing where the store has no accounting (the page already says it is empty)."""
    wanted = st.query_params.get("window", queries.DEFAULT_RELIABILITY_WINDOW)
    window = wanted if wanted in RELIABILITY_WINDOWS else queries.DEFAULT_RELIABILITY_WINDOW
    view = _reliability(_data_dir(cfg), window)
    if view.accounted_runs == 0 and quiet:
        return
    with st.container(key="reliability"):
        st.subheader("Reliability")
        if view.accounted_runs == 0:
            st.info(NO_ACCOUNTING)
            return
        st.session_state["fleet_window"] = window
        st.selectbox(
            "window",
            list(RELIABILITY_WINDOWS),
            format_func=lambda w: RELIABILITY_WINDOWS[w][0],
            key="fleet_window",
            on_change=lambda: _set_params(window=st.session_state["fleet_window"]),
        )
        _reliability_body(view)


def _reliability_body(view: ReliabilityView) -> None:
    r = view.report
    label = RELIABILITY_WINDOWS[view.window][0]
    if r.unaccounted_runs:
        st.caption(
            f"{len(r.unaccounted_runs)} ended runs that started in the {label} have no accounting "
            "and are left out: `triage report --backfill` analyses and records them."
        )
    if r.attempts == 0:
        st.info(f"No run with accounting started in the {label}: pick a longer window.")
        return
    cols = st.columns(5)
    cols[0].metric("ETTR", "-" if r.ettr is None else f"{r.ettr:.1%}", help="productive / allocated GPU-time")
    cols[1].metric("allocated (GPU·h)", f"{r.allocated_gpu_h:,.1f}")
    cols[2].metric(
        "lost (GPU·h)",
        f"{r.lost_gpu_h:,.1f}",
        delta=f"{r.lost_gpu_h / r.allocated_gpu_h:.1%} of allocated" if r.allocated_gpu_h > 0 else None,
        delta_color="off",
        delta_arrow="off",
    )
    rate = view.report.failures_per_1000_node_days
    cols[3].metric("failures / 1000 node-days", "-" if rate is None else f"{rate:,.0f}")
    cols[4].metric("MTTF", _hours(view.report.mttf_h), help="wall hours the runs ran per failure")
    st.caption(
        f"Attempts that started in the {label}: {r.runs} runs of {r.jobs} jobs, {r.attempts} "
        f"attempts, {r.failures} failures, {r.nodes} nodes, {r.node_days:,.1f} node-days."
    )
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Lost GPU-hours by cause** (`overhead`: start-up, saves, data wait)")
        by_cause = shaping.lost_by_category_frame(r)
        if by_cause.empty:
            st.caption("No lost time recorded.")
        else:
            st.altair_chart(charts.lost_gpu_hours_chart(by_cause), width="stretch")
    with right:
        st.markdown("**Lost GPU-hours by culprit node** (top 10)")
        by_node = shaping.lost_by_node_frame(r)
        if by_node.empty:
            st.caption("No lost time was charged to a node.")
        else:
            st.dataframe(
                by_node,
                hide_index=True,
                width="stretch",
                column_config={
                    "gpu_h": st.column_config.NumberColumn("GPU·h", format="%.1f"),
                    "share": st.column_config.NumberColumn("share", format="percent"),
                },
            )
    lemons = shaping.lemon_frame(r)
    if lemons.empty:
        st.success(
            "No lemon nodes: no node was the culprit of more failures than its share of node-hours explains."
        )
    else:
        st.warning(
            f"Lemon node{'s' if len(lemons) > 1 else ''}: {_md(', '.join(lemons['node']))} — each the "
            "culprit of far more failures than its share of node-hours predicts.",
            icon="⚠️",
        )
        st.dataframe(
            lemons,
            hide_index=True,
            width="stretch",
            column_config={
                **_whole_numbers("failures"),
                "expected": st.column_config.NumberColumn("expected", format="%.2f"),
                "rate_ratio": st.column_config.NumberColumn("rate ratio", format="%.1f"),
                "p_value": st.column_config.NumberColumn("p-value", format="%.1e"),
                "evidence": st.column_config.TextColumn("evidence", width="large"),
            },
        )
    st.markdown("**By job size** (GPUs)")
    st.dataframe(
        shaping.by_size_frame(r),
        hide_index=True,
        width="stretch",
        column_config={
            **_whole_numbers("runs", "failures"),
            "ettr": st.column_config.ProgressColumn("ETTR", format="percent", min_value=0.0, max_value=1.0),
            "mttf_h": st.column_config.NumberColumn("MTTF (h)", format="%.1f"),
            "mttr_s": st.column_config.NumberColumn("MTTR (s)", format="%.0f"),
        },
    )


def _job_view(cfg: DashboardConfig, job_id: str | None) -> JobView | None:
    if job_id is None:
        st.info("No jobs yet: run `triage demo`, then pick a job in the sidebar.")
        return None
    try:
        return _job(_data_dir(cfg), job_id)
    except KeyError:
        st.warning(f"No job `{job_id}` in `{cfg.data_dir}`; pick one in the sidebar.")
        return None


def job_page(cfg: DashboardConfig, job_id: str | None) -> None:
    view = _job_view(cfg, job_id)
    if view is None:
        return
    a = view.analysis
    st.header(f"Job {a.job_id}")
    st.markdown(f"**status** {status_html(a.status)}", unsafe_allow_html=True)
    g = a.goodput
    cols = st.columns(5)
    cols[0].metric("attempts", len(a.attempts))
    cols[1].metric("goodput", "-" if g.ratio is None else f"{g.ratio:.1%}")
    cols[2].metric("incidents", len(a.incidents))
    cols[3].metric("last step", "-" if view.steps.empty else int(view.steps["step"].max()))
    cols[4].metric("wall time", f"{g.total_s:.0f} s")

    markers = shaping.job_markers(view)
    if view.steps.empty:
        st.info("This job has recorded no steps yet.")
    else:
        st.subheader("Throughput and step time")
        st.caption("Dashed rules: incidents (red), restarts (orange), checkpoints (green)")
        st.altair_chart(
            charts.step_timeline(view.steps, markers, "tokens_per_s", "throughput (tokens/s)"),
            width="stretch",
        )
        st.altair_chart(
            charts.step_timeline(view.steps, markers, "step_time_s", "step time (s, median over ranks)"),
            width="stretch",
        )
    left, right = st.columns(2)
    with left:
        st.subheader("Goodput and badput")
        st.altair_chart(charts.goodput_chart(shaping.goodput_frame(g)), width="stretch")
        for note in g.notes:
            st.caption(note)
        if g.recommended_checkpoint_interval_s is not None:
            st.caption(
                f"Recommended checkpoint interval (Young/Daly): {g.recommended_checkpoint_interval_s:.0f} s"
            )
    with right:
        st.subheader("Attempts")
        st.dataframe(
            status_styled(
                pd.DataFrame(
                    [{**s.to_dict(), "start": when(s.start), "end": when(s.end)} for s in a.attempts]
                )
            ),
            hide_index=True,
            width="stretch",
            column_config=_whole_numbers("attempt", "ranks", "first_step", "last_step"),
        )
    if not view.steps.empty:
        left, right = st.columns(2)
        left.altair_chart(charts.step_series(view.steps, "loss", "loss"), width="stretch")
        right.altair_chart(charts.step_series(view.steps, "grad_norm", "gradient norm (L2)"), width="stretch")
    st.subheader("Incidents")
    if not a.incidents:
        st.success("No incidents: nothing went wrong that the telemetry shows.")
    else:
        _open_buttons(queries.incident_table(a), "job")


def ranks_page(cfg: DashboardConfig, job_id: str | None) -> None:
    view = _job_view(cfg, job_id)
    if view is None:
        return
    attempts = [s.attempt for s in view.analysis.attempts]
    st.header(f"Ranks of job {view.job_id}")
    if not attempts:
        st.info("No rank of this job has started yet.")
        return
    attempt = st.selectbox("attempt", attempts, index=len(attempts) - 1, key="attempt")
    grid, bin_steps = _rank_grid(_data_dir(cfg), view.job_id, attempt, view.data.run_id)
    if grid.empty:
        st.info(f"Attempt {attempt} recorded no steps.")
    else:
        st.caption("A straggler shows as a dark row; a hang as rows that stop early.")
        st.altair_chart(charts.rank_heatmap(grid, "step_time_s", "step time (s)", bin_steps), width="stretch")
        st.altair_chart(
            charts.rank_heatmap(grid, "collective_wait_s", "collective wait (s)", bin_steps), width="stretch"
        )
    if view.analysis.stragglers:
        st.subheader("Straggler scores (compute time / median rank)")
        st.dataframe(
            pd.DataFrame([s.to_dict() for s in view.analysis.stragglers]), hide_index=True, width="stretch"
        )
    st.subheader("Bus bandwidth per collective")
    bw = _bandwidth(_data_dir(cfg), view.job_id, attempt, view.data.run_id)
    if bw.empty:
        st.info("No collective with a measured bus bandwidth in this attempt.")
    else:
        st.altair_chart(charts.bandwidth_chart(bw), width="stretch")
        st.dataframe(bw, hide_index=True, width="stretch")


def gpu_page(cfg: DashboardConfig, job_id: str | None) -> None:
    view = _job_view(cfg, job_id)
    if view is None:
        return
    st.header(f"GPU health — job {view.job_id}")
    nodes = sorted(str(n) for n in view.data.ranks["node"].dropna().unique())
    span = view.data.span()
    if not nodes or span is None:
        st.info("This job has no ranks on record yet.")
        return
    node = st.selectbox("node", nodes, key="gpu_node")
    gpus = [g for g in view.analysis.gpus if g["node"] == node]
    if gpus:
        st.dataframe(pd.DataFrame(gpus), hide_index=True, width="stretch")
    margin = 60.0
    series = _gpu_series(_data_dir(cfg), node, span[0] - margin, span[1] + margin)
    if series.empty:
        st.info(
            f"No GPU samples from {node} during this job: run `triage agent` on it "
            "(`--gpu sim` without GPUs) to record temperature, power, clocks and ECC."
        )
    else:
        left, right = st.columns(2)
        left.altair_chart(
            charts.gpu_metric(series, "temperature_celsius", "temperature (°C)"), width="stretch"
        )
        right.altair_chart(charts.gpu_metric(series, "power_watts", "power (W)"), width="stretch")
        left, right = st.columns(2)
        left.altair_chart(charts.gpu_metric(series, "sm_clock_mhz", "SM clock (MHz)"), width="stretch")
        right.altair_chart(
            charts.gpu_metric(series, "memory_clock_mhz", "memory clock (MHz)"), width="stretch"
        )
        events = shaping.clock_event_points(series)
        st.subheader("Clock-event reasons")
        if events.empty:
            st.caption("No clock-event reason other than idle was active.")
        else:
            st.altair_chart(charts.clock_events_chart(events), width="stretch")
        left, right = st.columns(2)
        left.altair_chart(
            charts.gpu_metric(series, "ecc_uncorrected_volatile", "uncorrectable ECC errors (count)"),
            width="stretch",
        )
        right.altair_chart(
            charts.gpu_metric(series, "remapped_rows_uncorrectable", "remapped rows, uncorrectable (count)"),
            width="stretch",
        )
    st.subheader("Xids")
    xids = shaping.xid_points(view.data, node)
    if xids.empty:
        st.caption(f"No Xid on {node} during this job.")
    else:
        st.altair_chart(charts.xid_chart(xids), width="stretch")
        st.dataframe(xids.assign(time=xids["time"].map(when)), hide_index=True, width="stretch")


def incident_page(cfg: DashboardConfig, job_id: str | None) -> None:
    view = _job_view(cfg, job_id)
    if view is None:
        return
    incidents = view.analysis.incidents
    if not incidents:
        st.header(f"Incidents of job {view.job_id}")
        st.success("This job has no incidents.")
        return
    wanted = st.query_params.get("incident")
    default = next((i for i, x in enumerate(incidents) if x.root), 0)
    index = (
        int(wanted) if wanted is not None and wanted.isdigit() and int(wanted) < len(incidents) else default
    )
    labels = [f"#{i} attempt {x.attempt}: {x.verdict.category.value}" for i, x in enumerate(incidents)]
    chosen = st.selectbox("incident", range(len(incidents)), index=index, format_func=lambda i: labels[i])
    if chosen != index:
        _go("incident", job=view.job_id, incident=chosen)
    d = shaping.incident_detail(view, index)
    v = d.verdict
    st.header(f"{v['category']} — job {view.job_id}, attempt {d.attempt}")
    if d.root_cause:
        st.markdown("**Root cause** of the attempt")
    st.markdown(f"> {_md(v['summary'])}")
    st.markdown(
        f"**category** `{v['category']}` · **layer** `{v['layer']}` · "
        f"**confidence** {v['confidence']:.2f} · **culprit** {_md(d.culprit)} · "
        f"**first seen** {when(v['first_seen'])}"
    )
    st.subheader("Action and result")
    st.markdown(
        f"- **recommended**: {_md(action_text(v['action']))} (`{v['action']}`)\n"
        f"- **taken**: {_md(d.action_taken)}\n"
        f"- **result**: {_md(d.result)}"
    )
    st.subheader("Evidence (log lines and metric points)")
    if d.evidence.empty:
        st.caption("The verdict carries no evidence items.")
    else:
        st.dataframe(
            d.evidence.assign(time=d.evidence["time"].map(when)),
            hide_index=True,
            width="stretch",
            column_config={"text": st.column_config.TextColumn("text", width="large")},
        )
    st.subheader(f"Consequences it explains ({len(d.consequences)})")
    if d.consequences:
        st.markdown("\n".join(f"- {_md(c)}" for c in d.consequences))
    else:
        st.caption("None: no other failure followed from it.")


def logs_page(cfg: DashboardConfig, job_id: str | None) -> None:
    view = _job_view(cfg, job_id)
    if view is None:
        return
    st.header(f"Output of job {view.job_id}")
    run_id = view.data.run_id
    if run_id is None:
        st.info("This job was not started by `triage run`, so its output was not captured.")
        return
    attempts = [s.attempt for s in view.analysis.attempts] or [0]
    attempt = st.selectbox("attempt", attempts, index=len(attempts) - 1, key="log_attempt")
    ranks = view.data.ranks
    choices: list[int | None] = [
        None,
        *sorted(int(r) for r in ranks.loc[ranks["attempt"] == attempt, "rank"].unique()),
    ]
    rank = st.selectbox(
        "rank",
        choices,
        key="log_rank",
        format_func=lambda r: "every rank and the launcher" if r is None else f"rank {r}",
    )
    decisive = st.checkbox("only the lines that name a failure", key="log_decisive")
    frame = _log(_data_dir(cfg), view.job_id, run_id, int(attempt), rank, decisive)
    if frame.empty:
        st.caption(
            "Nothing captured for this choice (the output is kept only for runs started "
            "by `triage run`, under DATA_DIR/logs/<job>/<run>/)."
        )
        return
    st.caption(
        "Red: a line that names a failure; amber: a symptom, what ranks print once "
        "something else failed. The newest lines are last."
    )
    st.dataframe(
        log_view.highlight(frame),
        hide_index=True,
        width="stretch",
        column_config={"text": st.column_config.TextColumn("text", width="large")},
    )


RENDER: dict[str, Callable[[DashboardConfig, str | None], None]] = {
    "fleet": fleet_page,
    "job": job_page,
    "ranks": ranks_page,
    "gpu": gpu_page,
    "incident": incident_page,
    "logs": logs_page,
}


def _sidebar(cfg: DashboardConfig, page: str) -> str | None:
    """Page and job pickers; they write the URL's query parameters, which decide the view."""
    st.sidebar.title("Triage")
    st.session_state["nav_page"] = page
    st.sidebar.radio(
        "page",
        list(PAGES),
        format_func=PAGES.__getitem__,
        key="nav_page",
        on_change=lambda: _set_params(page=st.session_state["nav_page"]),
    )
    jobs = _job_ids(_data_dir(cfg))
    wanted = st.query_params.get("job")
    if wanted is not None and not is_valid_name(wanted):
        st.sidebar.warning("The page address names no valid job id; showing the newest job.")
        wanted = None
    job_id = wanted if wanted is not None else (jobs[0] if jobs else None)
    if jobs:
        options = jobs if job_id in jobs else [job_id, *jobs]
        st.session_state["nav_job"] = job_id
        st.sidebar.selectbox(
            "job",
            options,
            key="nav_job",
            on_change=lambda: _set_params(job=st.session_state["nav_job"], incident=None),
        )
    st.sidebar.caption(f"Data: `{cfg.data_dir}`  \nRefreshes every {cfg.refresh_s:g} s")
    return job_id


def _set_params(**params: object) -> None:
    for k, v in params.items():
        if v is None:
            st.query_params.pop(k, None)
        else:
            st.query_params[k] = str(v)


def main(cfg: DashboardConfig) -> None:
    st.set_page_config(page_title="Triage reliability", layout="wide")
    page = st.query_params.get("page", "fleet")
    if page not in RENDER:
        page = "fleet"
    try:
        job_id = _sidebar(cfg, page)
    except StoreUnreadable as exc:
        st.error(str(exc))
        return

    @st.fragment(run_every=cfg.refresh_s)
    def body() -> None:
        try:
            RENDER[page](cfg, job_id)
        except StoreUnreadable as exc:
            st.error(str(exc))
        st.caption(f"Read at {when(time.time())}")

    body()


main(CFG)
