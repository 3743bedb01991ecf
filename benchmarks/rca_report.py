"""The Markdown form of a campaign's scores (`triage bench rca` prints it and writes it beside
the JSON), so the numbers can be pasted into the README and a miss read without the JSON."""

from __future__ import annotations

from typing import Any


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ratio(r: dict[str, Any]) -> str:
    return f"{_num(r['value'])} ({r['hits']}/{r['total']})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _culprit(c: dict[str, Any]) -> str:
    if c.get("rank") is None and c.get("node") is None:
        return "-"
    gpu = "" if c.get("gpu") is None else f" gpu{c['gpu']}"
    return f"rank {c.get('rank')} {c.get('node')}{gpu}"


def markdown(result: dict[str, Any]) -> str:
    s = result["scores"]
    lines = [
        f"## triage bench rca: {result.get('trials_done', result['trials'])} of {result['trials']} trials, "
        f"{s['judgements']} judgements, "
        f"seed {result['seed']}, {result['wall_s'] / 60:.1f} min",
        "",
        *_table(
            ["category", "precision", "recall", "F1", "support"],
            [
                [c, _num(v["precision"]), _num(v["recall"]), _num(v["f1"]), str(v["support"])]
                for c, v in s["categories"].items()
            ],
        ),
        "",
        f"macro F1 {_num(s['macro_f1'])}, micro F1 {_num(s['micro_f1'])}",
        "",
        *_table(
            ["culprit", "accuracy"],
            [[k, _ratio(v)] for k, v in s["culprit"].items()],
        ),
        "",
        *_table(
            ["action", "rate"],
            [
                ["accuracy", _ratio(s["action"]["accuracy"])],
                ["false fail-fast (recoverable fault failed fast)", _ratio(s["action"]["false_fail_fast"])],
                ["false restart (deterministic bug restarted)", _ratio(s["action"]["false_restart"])],
            ],
        ),
        "",
        *_table(
            ["kind", "n", "detect p50 (s)", "detect p90 (s)"],
            [
                [k, str(v["n"]), _num(v["p50_s"], 1), _num(v["p90_s"], 1)]
                for k, v in s["detection_latency"].items()
            ],
        ),
        "",
        "Confusion (rows: true cause, columns: what Triage said):",
        "",
    ]
    labels = sorted({g for row in s["confusion"].values() for g in row})
    lines += _table(
        ["true \\ got", *labels],
        [[e, *(str(row.get(g, "")) for g in labels)] for e, row in sorted(s["confusion"].items())],
    )
    lines += ["", f"Misses: {len(s['misses'])}", ""]
    if s["misses"]:
        lines += _table(
            ["trial", "inject", "attempt", "expected", "got", "summary"],
            [
                [
                    m["trial"],
                    f"`{m['spec']}`",
                    str(m["attempt"]),
                    f"{m['expected']} {_culprit(m['expected_culprit'])} -> {m['expected_action']}",
                    f"{m['got']} {_culprit(m['got_culprit'])} -> {m['got_action']}",
                    m["summary"].replace("|", "/").replace("\n", " ")[:200],
                ]
                for m in s["misses"]
            ],
        )
    return "\n".join(lines) + "\n"
