"""End to end: `triage agent` with simulated GPUs, scraped by a real Prometheus that evaluates
`alerts/triage-rules.yml`; a GPU fault and a hung job must fire their alerts with the labels that
name the culprit.

The rules are used as written except for their `for:` durations, which this test divides by 60
(a rule's minutes become seconds; `shortened_rules`), so alerts held for minutes in production
fire within the test's time bound. The real rule file is never edited.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import PROMETHEUS_INSTALL, require_tool
from store_spools import write_rank, write_segment

from triage.fault_schedule import GpuFault, append_fault
from triage.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "alerts" / "triage-rules.yml"
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)
DEADLINE_S = 90.0
_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def shortened_rules(text: str) -> str:
    """The rule file with every `for:` divided by 60 (at least 1 s): 5m -> 5s, 1h -> 60s."""
    doc = yaml.safe_load(text)
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                m = _DURATION.match(str(rule["for"]))
                assert m, f"unexpected duration {rule['for']!r} in {rule.get('alert')}"
                rule["for"] = f"{max(1, int(m[1]) * _SECONDS[m[2]] // 60)}s"
    return yaml.safe_dump(doc, sort_keys=False)


def test_shortened_rules_only_change_durations():
    original = yaml.safe_load(RULES.read_text())
    short = yaml.safe_load(shortened_rules(RULES.read_text()))
    pairs = [
        (a, b)
        for ga, gb in zip(original["groups"], short["groups"])
        for a, b in zip(ga["rules"], gb["rules"])
    ]
    assert len(pairs) == sum(len(g["rules"]) for g in original["groups"])
    for a, b in pairs:
        assert {k: v for k, v in a.items() if k != "for"} == {k: v for k, v in b.items() if k != "for"}
    assert {b["for"] for a, b in pairs if a.get("for") == "5m"} == {"5s"}


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def firing(prom: str) -> list[dict]:
    try:
        alerts = get_json(f"{prom}/api/v1/alerts")["data"]["alerts"]
    except OSError:
        return []
    return [a for a in alerts if a["state"] == "firing"]


def scraped(prom: str, query: str) -> bool:
    try:
        return bool(get_json(f"{prom}/api/v1/query?query={urllib.request.quote(query)}")["data"]["result"])
    except OSError:
        return False


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.stderr.read() if proc.stderr else ""


@pytest.mark.slow
def test_gpu_fault_and_hang_fire_their_alerts_in_prometheus(tmp_path):
    prometheus = PROMETHEUS or require_tool("prometheus", install=PROMETHEUS_INSTALL)
    data, agent_port, prom_port = tmp_path / "data", free_port(), free_port()
    rules = tmp_path / "rules.yml"
    rules.write_text(shortened_rules(RULES.read_text()))
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [
                    {
                        "job_name": "triage",
                        "honor_labels": True,
                        "static_configs": [{"targets": [f"127.0.0.1:{agent_port}"]}],
                    }
                ],
            }
        )
    )
    # A job whose ranks on this node stopped stepping 15 minutes ago but still heartbeat.
    now = time.time()
    _, seq = write_rank(data, "node0", "hungjob", 0, 3, steps=2, t0=now - 900, pid=os.getpid())

    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "agent",
            "--data-dir",
            str(data),
            "--node",
            "node0",
            "--gpu",
            "sim",
            "--sim-gpus",
            "2",
            "--port",
            str(agent_port),
            "--interval",
            "0.5",
            "--store-interval",
            "1",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    prom = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{prom_port}"
    deadline = time.monotonic() + DEADLINE_S
    fired: dict[str, dict] = {}
    try:
        # The Xid counter must be scraped at 0 first: increase() needs the step from 0 to 1.
        while not scraped(url, 'triage_gpu_xid_errors_total{gpu="1",xid="79"} == 0'):
            assert agent.poll() is None and prom.poll() is None, "agent or prometheus exited"
            assert time.monotonic() < deadline, "Prometheus never scraped the agent"
            time.sleep(0.5)
        append_fault(data, GpuFault(time=time.time(), node="node0", gpu=1, kind="xid", xid=79))
        wanted = {"TriageGpuFallenOffBus", "TriageGpuLost", "TriageJobHung"}
        while not wanted <= set(fired):
            assert agent.poll() is None and prom.poll() is None, "agent or prometheus exited"
            assert time.monotonic() < deadline, f"only {sorted(fired)} fired within {DEADLINE_S} s"
            write_segment(
                data,
                "node0",
                "hungjob",
                0,
                3,
                seq,
                "heartbeats",
                [{"time": time.time(), "step": 1, "pid": os.getpid()}],
                pid=os.getpid(),
            )
            seq += 1
            fired.update({a["labels"]["alertname"]: a for a in firing(url)})
            time.sleep(1)
    finally:
        agent_log, prom_log = stop(agent), stop(prom)
    assert fired, (agent_log[-2000:], prom_log[-2000:])
    bus = fired["TriageGpuFallenOffBus"]["labels"]
    assert (bus["node"], bus["gpu"], bus["xid"], bus["simulated"]) == ("node0", "1", "79", "true")
    assert bus["uuid"].startswith("GPU-SIM-") and bus["severity"] == "critical"
    lost = fired["TriageGpuLost"]["labels"]
    assert (lost["node"], lost["gpu"], lost["category"]) == ("node0", "1", "gpu_fallen_off_bus")
    hung = fired["TriageJobHung"]
    assert hung["labels"]["job"] == "hungjob"
    assert hung["labels"]["category"] == "collective_timeout"
    # The description queries the per-rank series (job, rank, node) for the rank that stopped.
    assert "Rank 3 on node node0 stopped first" in hung["annotations"]["description"]
