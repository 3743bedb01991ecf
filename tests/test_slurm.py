"""`triage run --launcher slurm` on a real 2-node Slurm cluster (tests/slurm_cluster.py): a job
runs as srun steps across both nodes; a lost GPU leaves its node out of the next step (and, with
--slurm-drain, out of Slurm until `triage nodes clear`); a preemption checkpoints, requeues and
the next incarnation goes on with the run; the prolog health gate drains a node whose GPU is
lost. Skipped only where Slurm is not installed (CI installs it)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture

from triage.fault_schedule import GpuFault, append_fault
from triage.store import open_snapshot

pytestmark = pytest.mark.slow

PY = sys.executable


def _train(steps: int, *inject: str) -> str:
    """The reference trainer, one rank per node, as the batch script's `triage run` runs it."""
    args = [
        PY,
        "-m",
        "triage.cli",
        "train",
        "--nproc-per-node",
        "1",
        "--steps",
        str(steps),
        "--checkpoint-every",
        "4",
        "--collective-timeout",
        "15",
        "--shutdown-timeout",
        "10",
    ]
    for spec in inject:
        args += ["--inject", spec]
    return " ".join(args)


def _script(data_dir: Path, job_id: str, train: str, *flags: str, sbatch: str = "-N2") -> str:
    return (
        "#!/bin/bash\n"
        f"#SBATCH {sbatch}\n"
        f"exec {PY} -m triage.cli run --launcher slurm --data-dir {data_dir} --job-id {job_id} "
        f"--hang-timeout 20 --backoff 1 --grace 5 --json {' '.join(flags)} -- {train}\n"
    )


def _reports(out: Path, count: int | None = None) -> list[dict]:
    """The JSON reports in a batch job's output, one per incarnation (a requeued job appends);
    `count` of them, or the test fails with the output's tail, the evidence of what happened."""
    text = out.read_text()
    found, at = [], text.find("\n{\n")
    while at >= 0:
        report, end = json.JSONDecoder().raw_decode(text, at + 1)
        found.append(report)
        at = text.find("\n{\n", end)
    assert found, f"no report in {out}:\n{text[-3000:]}"
    assert count is None or len(found) == count, f"{len(found)} report(s), not {count}:\n{text[-6000:]}"
    return found


def _report(out: Path) -> dict:
    return _reports(out)[-1]


def _ranks(data_dir: Path, job_id: str) -> dict[int, list[str]]:
    with open_snapshot(data_dir) as snap:
        rows = snap.sql("SELECT DISTINCT attempt, node FROM ranks WHERE job_id = $1 ORDER BY 1, 2", [job_id])
    out: dict[int, list[str]] = {}
    for r in rows:
        out.setdefault(int(r["attempt"]), []).append(r["node"])
    return out


def _rank_node(data_dir: Path, job_id: str, *, attempt: int, rank: int) -> str:
    with open_snapshot(data_dir) as snap:
        rows = snap.sql(
            "SELECT DISTINCT node FROM ranks WHERE job_id = $1 AND attempt = $2 AND rank = $3",
            [job_id, attempt, rank],
        )
    (row,) = rows
    return str(row["node"])


def test_a_lost_gpu_on_a_one_node_job_requeues_it_onto_another_node(slurm_cluster: SlurmCluster, tmp_path):  # noqa: F811
    """No node of the allocation is left once the culprit's is out: Slurm must place the job
    again, elsewhere, and the next incarnation goes on with the run."""
    out = tmp_path / "job.out"
    train = _train(8, "xid@step=5,rank=0,xid=79")
    script = _script(tmp_path, "slurm-one", train, sbatch="-N1 --requeue --open-mode=append")
    job = slurm_cluster.sbatch(script, "-o", str(out))
    slurm_cluster.wait_job(job, ("COMPLETED", "FAILED"), 240)
    first, second = _reports(out, 2)
    bad = _rank_node(tmp_path, "slurm-one", attempt=0, rank=0)
    (good,) = {"node0", "node1"} - {bad}
    assert first["status"] == "requeued" and second["status"] == "completed", out.read_text()[-4000:]
    assert first["run_id"] == second["run_id"]
    (lost,) = first["attempts"]
    assert lost["verdict"]["category"] == "gpu_fallen_off_bus" and lost["verdict"]["culprit"]["node"] == bad
    assert f"without {bad}" in first["reason"]
    assert (
        slurm_cluster.job_field(job, "ExcNodeList") == bad and slurm_cluster.job_field(job, "Restarts") == "1"
    )
    (resumed,) = second["attempts"]
    assert resumed["attempt"] == 1 and resumed["resumed_from_step"] == 4
    assert _ranks(tmp_path, "slurm-one") == {0: [bad], 1: [good]}
    # without --slurm-drain the node stays in service in Slurm; the ledger keeps it from our jobs
    assert not slurm_cluster.node_state(bad)[0].startswith("drain")
    slurm_cluster.run(PY, "-m", "triage.cli", "nodes", "clear", bad, "--data-dir", str(tmp_path))


def test_a_lost_gpu_moves_the_job_to_the_other_node_and_drains_its_node_until_cleared(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path,
):
    out = tmp_path / "job.out"
    train = _train(8, "xid@step=5,rank=1,xid=79")
    job = slurm_cluster.sbatch(_script(tmp_path, "slurm-xid", train, "--slurm-drain"), "-o", str(out))
    slurm_cluster.wait_job(job, ("COMPLETED", "FAILED"), 240)
    report = _report(out)
    assert report["status"] == "completed", out.read_text()[-4000:]
    # torchrun's rendezvous, not the node order, gives out the ranks: rank 1 may be on either
    bad = _rank_node(tmp_path, "slurm-xid", attempt=0, rank=1)
    (good,) = {"node0", "node1"} - {bad}
    first, second = report["attempts"]
    assert first["verdict"]["category"] == "gpu_fallen_off_bus"
    assert first["verdict"]["culprit"]["node"] == bad and first["verdict"]["culprit"]["rank"] == 1
    assert first["action"] == "restart_excluding_node"
    # the next step ran on the other node alone, resharded from 2 ranks to 1, from the checkpoint
    assert _ranks(tmp_path, "slurm-xid") == {0: ["node0", "node1"], 1: [good]}
    assert second["outcome"] == "completed" and second["resumed_from_step"] == 4
    state, reason = slurm_cluster.node_state(bad)
    assert state.startswith("drain") and reason.startswith("triage: gpu_fallen_off_bus")
    assert "Xid 79" in reason and "slurm-xid" in reason
    assert not slurm_cluster.node_state(good)[0].startswith("drain")
    # a new 2-node job waits for the drained node until a person returns it to service
    waiting = slurm_cluster.sbatch("#!/bin/bash\ntrue\n", "-N2", "-o", "/dev/null")
    time.sleep(3)
    assert slurm_cluster.job_field(waiting, "JobState") == "PENDING"
    cleared = slurm_cluster.run(PY, "-m", "triage.cli", "nodes", "clear", bad, "--data-dir", str(tmp_path))
    assert f"resumed {bad} in Slurm" in cleared.stdout
    slurm_cluster.wait_job(waiting, ("COMPLETED",), 60)
    assert not slurm_cluster.node_state(bad)[0].startswith("drain")


def _max_step(data_dir: Path, job_id: str) -> int:
    with open_snapshot(data_dir) as snap:
        rows = snap.sql("SELECT max(step) AS s FROM steps WHERE job_id = $1", [job_id])
    return int(rows[0]["s"] or -1) if rows else -1


def test_a_preempted_job_checkpoints_is_requeued_and_goes_on_with_its_run(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path,
):
    out = tmp_path / "job.out"
    train = _train(14, "slow@step=1,rank=0,seconds=0.4")  # attempt 0 only: time to preempt it
    script = _script(tmp_path, "slurm-pre", train, sbatch="-N2 --requeue --open-mode=append")
    job = slurm_cluster.sbatch(script, "-o", str(out))
    slurm_cluster.wait_until("step 5 in the store", lambda: _max_step(tmp_path, "slurm-pre") >= 5, 120)
    # what `--signal=B:TERM@60` does before the time limit, or a preemption: SIGTERM to the batch
    slurm_cluster.run("scancel", "--signal=TERM", "--batch", job)
    slurm_cluster.wait_until("the requeue", lambda: slurm_cluster.job_field(job, "Restarts") == "1", 90)
    slurm_cluster.wait_job(job, ("COMPLETED", "FAILED"), 180)
    reports = _reports(out)
    assert [r["status"] for r in reports] == ["requeued", "completed"], out.read_text()[-4000:]
    first, second = reports
    assert first["run_id"] == second["run_id"]  # the same run, attempts numbered on
    assert len(first["attempts"]) == 1, out.read_text()[-6000:]  # no restart beside the notice
    (preempted,) = first["attempts"]
    assert preempted["outcome"] == "preempted" and preempted["action"] == "checkpoint_and_requeue"
    (resumed,) = second["attempts"]
    assert resumed["attempt"] == 1 and resumed["outcome"] == "completed"
    # from a checkpoint, never from scratch: the SIGTERM's own save when it finished, else the
    # newest periodic one (Slurm signals torchrun too, which may cut the ranks' save short)
    assert resumed["resumed_from_step"] >= 4
    assert _ranks(tmp_path, "slurm-pre") == {0: ["node0", "node1"], 1: ["node0", "node1"]}


def test_the_prolog_health_gate_drains_a_node_whose_gpu_is_lost(slurm_cluster: SlurmCluster, tmp_path):  # noqa: F811
    repo = Path(__file__).resolve().parents[1]
    slurm_cluster.set_gate(
        "#!/bin/sh\n"
        f"export SLURM_CONF={slurm_cluster.env['SLURM_CONF']}\n"
        f"export TRIAGE={Path(PY).parent / 'triage'} TRIAGE_DATA_DIR={tmp_path}\n"
        'export TRIAGE_HEALTH_ARGS="--gpu sim --sim-gpus 2 --min-free-disk-gb 0 --min-free-mem-gb 0"\n'
        f"exec {repo / 'deploy' / 'slurm' / 'triage-prolog.sh'}\n"
    )
    try:
        # a job on a healthy node passes the gate
        ok = slurm_cluster.sbatch("#!/bin/bash\ntrue\n", "-N1", "-w", "node0", "-o", "/dev/null")
        slurm_cluster.wait_job(ok, ("COMPLETED",), 60)
        # node1's GPU 1 falls off the bus between jobs: the next job's prolog finds it
        append_fault(tmp_path, GpuFault(time=time.time(), node="node1", gpu=1, kind="xid", xid=79, params={}))
        job = slurm_cluster.sbatch("#!/bin/bash\ntrue\n", "-N1", "-w", "node1", "-o", "/dev/null")
        slurm_cluster.wait_until(
            "node1 drained", lambda: slurm_cluster.node_state("node1")[0].startswith("drain"), 60
        )
        _, reason = slurm_cluster.node_state("node1")
        assert reason.startswith("triage health-check: node1 UNHEALTHY: GPU 1 lost (Xid 79"), reason
        assert slurm_cluster.job_field(job, "JobState") != "COMPLETED"  # it never ran there
        assert not slurm_cluster.node_state("node0")[0].startswith("drain")
    finally:
        slurm_cluster.run("scancel", "--quiet", "--user=root", check=False)
        slurm_cluster.resume_all()


@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_an_unmodified_torchrun_script_runs_across_the_nodes_and_a_killed_or_hung_rank_is_named(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path,
    fault,
):
    """`-- torchrun --nproc-per-node 1 ddp_train.py`: no Triage code, no multi-node flags; each
    node's task adds them, the auto-hooks record the ranks under the Slurm node names. A hung
    rank on the other node is named from its Flight Recorder dump: the supervisor waits for
    the dumps of ranks that are no processes of its own (they run under slurmstepd)."""
    script = Path(__file__).parent / "workloads" / "ddp_train.py"
    train = (
        f"{PY} -m torch.distributed.run --nproc-per-node 1 {script} --steps 8 --checkpoint {tmp_path}/ckpt.pt"
    )
    faults = (
        f"export WORKLOAD_FAULT={fault} WORKLOAD_FAULT_RANK=1 WORKLOAD_FAULT_STEP=5 "
        f"WORKLOAD_FAULT_ONCE={tmp_path}/fault-done\n"
    )
    out = tmp_path / "job.out"
    body = _script(tmp_path, "slurm-plain", train)
    job = slurm_cluster.sbatch(body.replace("exec ", faults + "exec ", 1), "-o", str(out))
    slurm_cluster.wait_job(job, ("COMPLETED", "FAILED"), 240)
    report = _report(out)
    assert report["status"] == "completed", out.read_text()[-4000:]
    # an attempt whose rendezvous port another test's process took between its pick and its bind
    # (the tests run side by side) is restarted, rightly: not the fault under test
    raced = [a for a in report["attempts"] if _port_taken(a)]
    first, second = [a for a in report["attempts"] if a not in raced]
    assert first["outcome"] == {"kill": "failed", "hang": "hung"}[fault] and second["outcome"] == "completed"
    assert first["verdict"]["culprit"]["rank"] == 1, first["verdict"]
    if fault == "kill":
        node = _rank_node(tmp_path, "slurm-plain", attempt=first["attempt"], rank=1)
        assert first["verdict"]["culprit"]["node"] == node
    else:  # the script's own sleep: its rank, never its node, is to blame
        assert first["verdict"]["category"] == "collective_timeout", first["verdict"]
        assert "time.sleep" in json.dumps(first["verdict"]["evidence"]), first["verdict"]
    ranks = _ranks(tmp_path, "slurm-plain")
    assert [ranks[a["attempt"]] for a in (first, second)] == [["node0", "node1"], ["node0", "node1"]]


def _port_taken(attempt: dict) -> bool:
    verdict = attempt.get("verdict") or {}
    return verdict.get("category") == "rendezvous_error" and "EADDRINUSE" in json.dumps(
        verdict.get("evidence")
    )


def test_a_job_cancelled_in_slurm_stays_cancelled_and_one_past_its_time_limit_is_not_requeued(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path,
):
    """Both end with the SIGTERM a preemption notice sends; neither may be requeued: a scancel
    is the user's (requeueing it would undo it), and Slurm requeues no job past its limit."""
    train = _train(400, "slow@step=1,rank=0,seconds=0.4")  # ~160 s: past a 1-minute limit
    cancelled, limited = tmp_path / "cancel.out", tmp_path / "limit.out"
    cancel_job = slurm_cluster.sbatch(
        _script(tmp_path / "c", "slurm-cancel", train, sbatch="-N1 --requeue --open-mode=append"),
        "-o",
        str(cancelled),
    )
    limit_job = slurm_cluster.sbatch(
        _script(tmp_path / "l", "slurm-limit", train, sbatch="-N1 -t 1 --requeue --open-mode=append"),
        "-o",
        str(limited),
    )
    slurm_cluster.wait_until(
        "step 3 in the store", lambda: _max_step(tmp_path / "c", "slurm-cancel") >= 3, 120
    )
    slurm_cluster.run("scancel", cancel_job)
    slurm_cluster.wait_job(cancel_job, ("CANCELLED",), 60)
    slurm_cluster.wait_job(limit_job, ("TIMEOUT",), 150)
    time.sleep(8)  # a requeue (cred_expire is 5 s) would show by now
    assert slurm_cluster.job_field(cancel_job, "Restarts") == "0", cancelled.read_text()[-3000:]
    assert slurm_cluster.job_field(cancel_job, "JobState") == "CANCELLED"
    text = cancelled.read_text()
    assert "the job was cancelled in Slurm" in text and "not requeueing it" in text, text[-3000:]
    assert "requeued as Slurm job" not in text
    with open_snapshot(tmp_path / "c") as snap:
        runs = snap.sql("SELECT status, reason FROM runs WHERE job_id = 'slurm-cancel'")
    assert {r["status"] for r in runs} == {"running", "interrupted"}, runs  # its start, its end
    assert any("cancelled in Slurm" in (r["reason"] or "") for r in runs)
    assert slurm_cluster.job_field(limit_job, "Restarts") == "0"
    text = limited.read_text()
    assert "Slurm's time limit ended the job" in text and "submit it again" in text, text[-3000:]
    assert "Slurm refused" not in text and "SlurmError" not in text
