"""Altair charts of the dashboard: every axis says its unit, every time axis is UTC wall time.

Builders take the frames of `queries`/`shaping` and return a chart; they never read the store,
so a test can render one to a Vega-Lite spec and check what it encodes.

Times (triage.display's policy: every time shown is UTC): a time column goes to Vega as
timezone-aware UTC datetimes on a `utc` scale with an explicit label format, so the axis reads
`02:51:07` in UTC whatever the viewer's browser zone (Streamlit hands Vega aware datetimes as
the instants they are; naive ones it shifts by the browser's offset), and never shows Vega's
sub-second `.760` ticks. Tooltips show the time as `triage.display.when` writes it.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from triage.analyzers.lost_time import OVERHEAD
from triage.display import when
from triage.taxonomy import Layer

WIDTH = "container"
MARKER_COLORS = alt.Scale(
    domain=["incident", "restart", "checkpoint"], range=["#d62728", "#ff7f0e", "#2ca02c"]
)
#: One colour per taxonomy layer (and grey for overhead, time no incident caused), fixed so a
#: layer keeps its colour whichever causes a window holds.
LAYER_COLORS = alt.Scale(
    domain=[*(layer.value for layer in Layer), OVERHEAD],
    range=["#1f77b4", "#9467bd", "#ff7f0e", "#d62728", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f"],
)
TIME_TITLE = "time (UTC)"
#: Labels of a job's time axes (a job's charts span minutes to hours).
TIME_FORMAT = "%H:%M:%S"
#: Labels of the fleet's time axis, whose incidents may span days.
DATE_TIME_FORMAT = "%m-%d %H:%M"
#: The tooltip column that holds each point's time as `triage.display.when` writes it.
WHEN = "time_utc"


def _utc(seconds: pd.Series) -> pd.Series:
    """Unix seconds -> timezone-aware UTC datetimes."""
    return pd.to_datetime(seconds.astype(float), unit="s", utc=True)


def _with_time(df: pd.DataFrame, col: str = "time") -> pd.DataFrame:
    """`col` (unix seconds) as UTC datetimes, and the same time as text in `WHEN`."""
    out = df.copy()
    out[WHEN] = [when(t) for t in out[col].astype(float)]
    out[col] = _utc(out[col])
    return out


def time_x(fmt: str = TIME_FORMAT) -> alt.X:
    """The x channel of every time axis: UTC scale, explicit labels, titled `time (UTC)`."""
    return alt.X(
        "time:T", title=TIME_TITLE, scale=alt.Scale(type="utc"), axis=alt.Axis(format=fmt, labelOverlap=True)
    )


def _time_tooltip() -> alt.Tooltip:
    return alt.Tooltip(f"{WHEN}:N", title="time")


def marker_rules(markers: pd.DataFrame) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(_with_time(markers))
        .mark_rule(strokeWidth=2, strokeDash=[4, 3])
        .encode(
            x=time_x(),
            color=alt.Color("kind:N", scale=MARKER_COLORS, title="marker"),
            tooltip=[alt.Tooltip("kind:N"), alt.Tooltip("label:N"), _time_tooltip()],
        )
    )
    return chart


def step_timeline(
    steps: pd.DataFrame, markers: pd.DataFrame, column: str, title: str
) -> alt.LayerChart | alt.FacetChart:
    """`column` of every step over wall time, one line per attempt, with the job's incidents,
    restarts and checkpoints as vertical rules on the same axis."""
    data = steps.dropna(subset=[column]).assign(time=lambda d: d["end"])
    line = (
        alt.Chart(_with_time(data))
        .mark_line(point=True)
        .encode(
            x=time_x(),
            y=alt.Y(f"{column}:Q", title=title),
            detail="attempt:N",
            tooltip=["attempt:Q", "step:Q", alt.Tooltip(f"{column}:Q", format=".3f"), _time_tooltip()],
        )
    )
    return alt.layer(line, marker_rules(markers)).properties(width=WIDTH, height=220)


def step_series(steps: pd.DataFrame, column: str, title: str) -> alt.Chart:
    """`column` by step number, one colour per attempt (a restart's redone steps overlap)."""
    chart: alt.Chart = (
        alt.Chart(steps.dropna(subset=[column]))
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y(f"{column}:Q", title=title),
            color=alt.Color("attempt:N", title="attempt"),
            tooltip=["attempt:Q", "step:Q", alt.Tooltip(f"{column}:Q", format=".4g")],
        )
        .properties(width=WIDTH, height=220)
    )
    return chart


def goodput_chart(frame: pd.DataFrame) -> alt.Chart:
    """Productive time and each badput bucket as bars, in seconds."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("bucket:N", sort="-x", title=None, axis=alt.Axis(labelLimit=220, labelOverlap=False)),
            x=alt.X("seconds:Q", title="wall time (s)"),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["goodput", "badput"], range=["#2ca02c", "#d62728"]),
                title=None,
            ),
            tooltip=[
                "bucket:N",
                alt.Tooltip("seconds:Q", format=".1f"),
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
        .properties(width=WIDTH, height=60 + 30 * len(frame))
    )
    return chart


def lost_gpu_hours_chart(frame: pd.DataFrame) -> alt.Chart:
    """Lost GPU-hours per cause category as bars, largest first, coloured by layer."""
    chart: alt.Chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("category:N", sort="-x", title=None, axis=alt.Axis(labelLimit=220, labelOverlap=False)),
            x=alt.X("gpu_h:Q", title="lost GPU-hours (GPU·h)"),
            color=alt.Color(
                "layer:N",
                scale=LAYER_COLORS,
                title="layer",
                legend=alt.Legend(values=[x for x in LAYER_COLORS.domain if x in set(frame["layer"])]),
            ),
            tooltip=[
                "category:N",
                "layer:N",
                alt.Tooltip("gpu_h:Q", format=".1f", title="GPU·h"),
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
        .properties(width=WIDTH, height=60 + 26 * len(frame))
    )
    return chart


def incidents_over_time(incidents: pd.DataFrame) -> alt.Chart:
    """Each incident at its first-seen time, one row per category, coloured by layer."""
    data = _with_time(incidents.dropna(subset=["time"]))
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_circle(size=120, opacity=0.85)
        .encode(
            x=time_x(DATE_TIME_FORMAT),
            y=alt.Y("category:N", title=None),
            color=alt.Color("layer:N", title="layer"),
            shape=alt.Shape("root_cause:N", title="root cause"),
            tooltip=[
                "job_id:N",
                "attempt:Q",
                "category:N",
                "layer:N",
                "culprit:N",
                "summary:N",
                _time_tooltip(),
            ],
        )
        .properties(width=WIDTH, height=max(160, 40 + 30 * incidents["category"].nunique()))
    )
    return chart


def incident_counts(incidents: pd.DataFrame) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(incidents)
        .mark_bar()
        .encode(
            x=alt.X("count():Q", title="incidents (count)", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("layer:N", title="layer"),
            color=alt.Color("category:N", title="category"),
            tooltip=["layer:N", "category:N", "count():Q"],
        )
        .properties(width=WIDTH, height=max(160, 40 + 30 * incidents["layer"].nunique()))
    )
    return chart


def rank_heatmap(grid: pd.DataFrame, column: str, title: str, bin_steps: int) -> alt.Chart:
    """Rank x step grid of `column`: a straggler is a dark row, a hang a row (or all rows)
    that stops early."""
    step_title = "step" if bin_steps == 1 else f"step (bins of {bin_steps})"
    chart: alt.Chart = (
        alt.Chart(grid.dropna(subset=[column]))
        .mark_rect()
        .encode(
            x=alt.X("step:O", title=step_title, axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("rank:O", title="rank"),
            color=alt.Color(f"{column}:Q", title=title, scale=alt.Scale(scheme="inferno", reverse=True)),
            tooltip=["rank:Q", "step:Q", alt.Tooltip(f"{column}:Q", format=".4f")],
        )
        .properties(width=WIDTH, height=max(120, min(600, 14 * grid["rank"].nunique())))
    )
    return chart


def bandwidth_chart(bw: pd.DataFrame) -> alt.Chart:
    data = bw.assign(collective=bw["op"] + " " + (bw["bytes"] / 2**20).round(2).astype(str) + " MiB")
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("collective:N", title=None),
            x=alt.X("busbw_gb_per_s:Q", title="bus bandwidth (GB/s)"),
            color=alt.Color("group:N", title="group"),
            tooltip=[
                "op:N",
                "group:N",
                "bytes:Q",
                "calls:Q",
                alt.Tooltip("busbw_gb_per_s:Q", format=".2f"),
                alt.Tooltip("median_ms:Q", format=".3f"),
            ],
        )
        .properties(width=WIDTH, height=40 + 22 * len(data))
    )
    return chart


def gpu_metric(series: pd.DataFrame, column: str, title: str) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(_with_time(series.dropna(subset=[column])))
        .mark_line()
        .encode(
            x=time_x(),
            y=alt.Y(f"{column}:Q", title=title),
            color=alt.Color("gpu:N", title="GPU"),
            tooltip=["gpu:Q", alt.Tooltip(f"{column}:Q", format=".1f"), _time_tooltip()],
        )
        .properties(width=WIDTH, height=200)
    )
    return chart


def clock_events_chart(points: pd.DataFrame) -> alt.Chart:
    """Every sample with an active clock-event reason, per GPU; health reasons in red."""
    chart: alt.Chart = (
        alt.Chart(_with_time(points))
        .mark_tick(thickness=2)
        .encode(
            x=time_x(),
            y=alt.Y("gpu:O", title="GPU"),
            color=alt.Color("reason:N", title="clock-event reason"),
            tooltip=["gpu:Q", "reason:N", "health:N", _time_tooltip()],
        )
        .properties(width=WIDTH, height=100 + 24 * max(1, points["gpu"].nunique()))
    )
    return chart


def xid_chart(points: pd.DataFrame) -> alt.LayerChart | alt.FacetChart:
    data = _with_time(points).assign(
        gpu=lambda d: d["gpu"].fillna(-1).astype(int), xid=lambda d: d["xid"].fillna(-1).astype(int)
    )
    base = alt.Chart(data).encode(x=time_x(), y=alt.Y("gpu:O", title="GPU (-1: unmapped)"))
    dots = base.mark_point(filled=True, size=140, color="#d62728").encode(
        tooltip=["gpu:Q", "xid:Q", "source:N", "text:N", _time_tooltip()]
    )
    labels = base.mark_text(dy=-12).encode(text="xid:Q")
    return alt.layer(dots, labels).properties(width=WIDTH, height=100 + 30 * max(1, data["gpu"].nunique()))
