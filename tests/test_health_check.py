"""`triage health-check`: the node gate for Slurm Prolog/Epilog.

Real simulated GPUs driven by the fault schedule, real kernel-log files through the agent's
parser, a real ledger (pyarrow segments) and the real CLI; NVML through the fake `pynvml` of
tests/test_collectors_nvml.py. The Slurm wrapper runs under bash with `scontrol` faked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import TRIAGE_CLI
from test_collectors_nvml import GPU_IS_LOST, h100, make_fake_nvml

from triage.cli import main
from triage.commands import health_check
from triage.fault_schedule import GpuFault, append_fault
from triage.store.node_health import QUARANTINED, SOURCE_VERDICT, HealthEntry, clear_node, record_health

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "deploy" / "slurm" / "triage-prolog.sh"
NODE = "node1"
CHECK_NAMES = ["gpu", "kernel_log", "ledger", "disk", "memory"]
#: Host thresholds no test machine misses, for the tests about something else.
EASY_HOST = ["--min-free-disk-gb", "0.001", "--min-free-mem-gb", "0.001"]


def sim_args(data_dir: Path, *more: str, node: str = NODE) -> list[str]:
    return ["--gpu", "sim", "--data-dir", str(data_dir), "--node", node, *EASY_HOST, *more]


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["health-check", *args])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"not one line: {out!r}"
    return rc, out.strip()


def check_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    rc = main(["health-check", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def fault(data_dir: Path, gpu: int, kind: str, xid: int | None, ago: float = 60.0, **params) -> None:
    append_fault(
        data_dir,
        GpuFault(time=time.time() - ago, node=NODE, gpu=gpu, kind=kind, xid=xid, params=params),
    )


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds")


def kernel_log(path: Path, *lines: tuple[float, str]) -> Path:
    path.write_text("".join(f"{iso(t)} {NODE} kernel: {msg}\n" for t, msg in lines))
    return path


def quarantine(
    data_dir: Path,
    node: str = NODE,
    gpu: int | None = 1,
    reason: str = "Xid 79 under job A",
    ago: float = 300,
) -> None:
    record_health(
        data_dir,
        [
            HealthEntry(
                time=time.time() - ago,
                node=node,
                gpu=gpu,
                state=QUARANTINED,
                reason=reason,
                source=SOURCE_VERDICT,
                by="triage run",
                category="gpu_fallen_off_bus",
                xid=79,
            )
        ],
    )


# -- healthy ----------------------------------------------------------------------------------


def test_a_healthy_simulated_node_passes_every_check_in_one_line(tmp_path, capsys):
    start = time.perf_counter()
    rc, line = check(capsys, *sim_args(tmp_path))
    elapsed = time.perf_counter() - start
    print(f"\nhealth-check in-process: {elapsed * 1000:.0f} ms: {line}", file=sys.stderr)
    assert rc == 0
    assert line == f"triage health-check: {NODE} healthy: gpu, kernel_log, ledger, disk, memory ok"
    assert "UNHEALTHY" not in line and "warning" not in line


def test_the_cli_process_loads_no_pandas_duckdb_or_torch(tmp_path):
    """Fast by construction: run as the Prolog runs it, and look at what it imported."""
    fault(tmp_path, 2, "xid", 79)  # the unhealthy path too (Xid meanings, the ledger's pyarrow)
    quarantine(tmp_path)
    code = (
        "import sys; from triage.cli import main; rc = main(sys.argv[1:]); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'duckdb', 'torch', 'streamlit'}); "
        "print('HEAVY', heavy); sys.exit(rc)"
    )
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, "health-check", *sim_args(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.perf_counter() - start
    print(f"\nhealth-check process wall time: {elapsed:.3f} s", file=sys.stderr)
    assert out.returncode == 1, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout
    assert "GPU 2 lost" in out.stdout


# -- GPUs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", [1, 6])
def test_a_gpu_lost_in_the_fault_schedule_fails_the_node_and_stays_lost_until_cleared(tmp_path, capsys, gpu):
    fault(tmp_path, gpu, "xid", 79)
    for _ in range(2):  # a lost GPU stays lost: every later check sees it, as every later agent
        rc, line = check(capsys, *sim_args(tmp_path))
        assert rc == 1
        assert line.startswith(f"triage health-check: {NODE} UNHEALTHY: GPU {gpu} lost (Xid 79 at ")
        others = [g for g in range(8) if g != gpu]
        assert not any(f"GPU {g} " in line for g in others), line
    quarantine(tmp_path, gpu=gpu)
    assert main(["nodes", "clear", NODE, "--data-dir", str(tmp_path), "--by", "test"]) == 0  # GPU reset
    capsys.readouterr()
    rc, line = check(capsys, *sim_args(tmp_path))
    assert (rc, "healthy" in line) == (0, True), line


@pytest.mark.parametrize(
    "kind,xid,params,expect",
    [
        ("ecc", 48, {"errors": 3}, "GPU 2 has 3 uncorrectable ECC error(s) since reset (Xid 48 at "),
        ("ecc", 63, {}, "GPU 2 has a row remap pending (reset it) (Xid 63 at "),
        ("ecc", 64, {}, "GPU 2 row remapping failed (no spare rows) (Xid 64 at "),
        ("xid", 119, {}, "GPU 2 lost (Xid 119 at "),
    ],
)
def test_gpu_memory_faults_fail_the_node(tmp_path, capsys, kind, xid, params, expect):
    fault(tmp_path, 2, kind, xid, **params)
    rc, line = check(capsys, *sim_args(tmp_path))
    assert rc == 1
    assert expect in line, line


@pytest.mark.parametrize(
    "kind,xid,params",
    [
        ("ecc", 92, {}),  # a high corrected-error rate: corrected, the GPU is fine
        ("xid", 13, {}),  # the application's own Xid
        ("thermal", None, {"duration_s": 5}),  # over, and not a health reading
    ],
)
def test_faults_the_gpu_survives_do_not_fail_the_node(tmp_path, capsys, kind, xid, params):
    fault(tmp_path, 2, kind, xid, **params)
    rc, line = check(capsys, *sim_args(tmp_path))
    assert rc == 0, line


def test_fewer_gpus_than_expected_fail_the_node(tmp_path, capsys):
    rc, line = check(capsys, *sim_args(tmp_path, "--sim-gpus", "4", "--expect-gpus", "8"))
    assert rc == 1 and "4 GPU(s) found, 8 expected" in line, line
    rc, line = check(capsys, *sim_args(tmp_path, "--sim-gpus", "8", "--expect-gpus", "8"))
    assert rc == 0, line


def _nvml_gpu(i: int, **over):
    """A healthy H100 of the fake NVML: no uncorrectable ECC error, no row remap."""
    return h100(i, **{"TotalEccErrors": lambda etype, counter: 0, "RemappedRows": (0, 0, 0, 0), **over})


def _with_nvml(monkeypatch, nv, devices: int, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(devices):
        (dev / f"nvidia{i}").touch()
    monkeypatch.setattr(health_check, "NVIDIA_DEVICE_GLOB", str(dev / "nvidia[0-9]*"))


def _nvml_args(tmp_path: Path, gpu: str = "nvml") -> list[str]:
    log = kernel_log(tmp_path / "kmsg.log")
    return ["--gpu", gpu, "--node", NODE, "--kernel-log", str(log), *EASY_HOST]


def test_nvml_gpus_healthy_lost_or_silent(tmp_path, capsys, monkeypatch):
    _with_nvml(monkeypatch, make_fake_nvml([_nvml_gpu(0), _nvml_gpu(1)]), 2, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path))
    assert rc == 0, line
    rc, out = check_json(capsys, *_nvml_args(tmp_path))
    assert out["checks"][0]["detail"] == "2 GPU(s) healthy"

    lost = _nvml_gpu(1, lost=lambda: True)
    _with_nvml(monkeypatch, make_fake_nvml([_nvml_gpu(0), lost]), 2, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path))
    assert rc == 1 and "UNHEALTHY: GPU 1 lost" in line and "GPU 0" not in line, line

    silent = _nvml_gpu(0, raises={"TotalEccErrors": 999})  # an error that is not "not supported"
    _with_nvml(monkeypatch, make_fake_nvml([silent]), 1, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path))
    assert rc == 1 and "GPU 0 does not answer ecc_uncorrected_volatile" in line, line

    no_ecc = _nvml_gpu(0, raises={"TotalEccErrors": 3, "RemappedRows": 3})  # 3: NOT_SUPPORTED
    _with_nvml(monkeypatch, make_fake_nvml([no_ecc]), 1, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path))
    assert rc == 0, line


def test_nvml_that_does_not_start(tmp_path, capsys, monkeypatch):
    # --gpu nvml: NVML must start.
    _with_nvml(monkeypatch, make_fake_nvml([], init_error=9), 0, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path))
    assert rc == 1 and "NVML not available" in line, line
    # --gpu auto on a node without NVIDIA devices: no GPUs to check.
    rc, out = check_json(capsys, *_nvml_args(tmp_path, "auto"))
    assert rc == 0 and out["checks"][0]["status"] == "skipped", out
    # --gpu auto where the driver's device files exist but NVML does not start: a broken driver.
    _with_nvml(monkeypatch, make_fake_nvml([], init_error=9), 8, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path, "auto"))
    assert rc == 1 and "NVML not available" in line and "8 NVIDIA device file(s) exist" in line, line


def test_a_gpu_lost_while_nvml_opens_it_fails_the_node(tmp_path, capsys, monkeypatch):
    nv = make_fake_nvml([_nvml_gpu(0)])

    def lost(_):
        raise nv.NVMLError(GPU_IS_LOST)

    nv.nvmlDeviceGetUUID = lost
    nv.nvmlDeviceGetName = lost
    nv.nvmlDeviceGetHandleByIndex = lost
    _with_nvml(monkeypatch, nv, 1, tmp_path)
    rc, line = check(capsys, *_nvml_args(tmp_path))
    assert rc == 1 and "GPUs not readable" in line, line


# -- kernel log -------------------------------------------------------------------------------


def test_a_kernel_log_with_xid_79_fails_the_node(tmp_path, capsys):
    now = time.time()
    log = kernel_log(
        tmp_path / "kmsg.log",
        (now - 50, "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics Exception"),
        (
            now - 40,
            "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        ),
    )
    rc, line = check(capsys, "--gpu", "none", "--kernel-log", str(log), "--node", NODE, *EASY_HOST)
    assert rc == 1
    assert "kernel log: Xid 79 (GPU fell off the bus) on PCI 0000:3b:00 at " in line, line
    assert "Xid 13" not in line


@pytest.mark.parametrize(
    "message,fails",
    [
        ("NVRM: Xid (PCI:0000:3b:00): 48, pid=7, name=python, An uncorrectable double bit error", True),
        ("NVRM: Xid (PCI:0000:3b:00): 95, pid=7, name=python, Uncontained: LTC TAG", True),
        ("NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.", True),
        ("NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=python, MMU Fault", False),
        ("NVRM: Xid (PCI:0000:3b:00): 94, pid=7, name=python, Contained: SM (0x1)", False),
        ("pcieport 0000:00:01.0: AER: Corrected error received: 0000:3b:00.0", False),
    ],
)
def test_which_kernel_log_lines_fail_the_node(tmp_path, capsys, message, fails):
    log = kernel_log(tmp_path / "kmsg.log", (time.time() - 10, message))
    rc, line = check(capsys, "--gpu", "none", "--kernel-log", str(log), "--node", NODE, *EASY_HOST)
    assert rc == (1 if fails else 0), line


def test_simulated_gpus_map_kernel_log_lines_to_their_gpu(tmp_path, capsys):
    # The sim's GPU 3 sits on PCI bus 0x5d (collectors/sim_gpu.py); its kernel log is the sim file.
    (tmp_path / "sim-kmsg").mkdir()
    kernel_log(
        tmp_path / "sim-kmsg" / f"{NODE}.log",
        (time.time() - 5, "NVRM: Xid (PCI:0000:5d:00): 95, pid=7, name=python, Uncontained: LTC TAG"),
    )
    rc, line = check(capsys, *sim_args(tmp_path))
    assert rc == 1 and "kernel log: Xid 95 (uncontained ECC error) on GPU 3 at " in line, line


def test_xids_from_before_the_nodes_last_clear_are_history(tmp_path, capsys):
    now = time.time()
    old = (now - 1000, "NVRM: Xid (PCI:0000:3b:00): 79, pid=7, name=python, GPU has fallen off the bus.")
    log = kernel_log(tmp_path / "kmsg.log", old)
    args = [
        "--gpu",
        "none",
        "--kernel-log",
        str(log),
        "--data-dir",
        str(tmp_path),
        "--node",
        NODE,
        *EASY_HOST,
    ]
    assert check(capsys, *args)[0] == 1
    quarantine(tmp_path, gpu=None, ago=900)
    clear_node(tmp_path, NODE, by="test", now=now - 500)  # cleared after the Xid
    rc, out = check_json(capsys, *args)
    assert rc == 0, out["reason"]
    assert "1 older than the node's last clear" in out["checks"][1]["detail"]
    kernel_log(log, old, (now - 100, old[1]))  # the same Xid again after the clear
    rc, line = check(capsys, *args)
    assert rc == 1 and "Xid 79" in line, line


def test_an_unreadable_kernel_log_is_unavailable_not_healthy_and_fails_under_strict(tmp_path, capsys):
    args = ["--gpu", "none", "--kernel-log", str(tmp_path / "missing.log"), "--node", NODE, *EASY_HOST]
    rc, line = check(capsys, *args)
    assert rc == 0
    assert "healthy" in line and "warning: kernel log unavailable (Xids not checked): " in line, line
    rc, out = check_json(capsys, *args)
    kernel = out["checks"][1]
    assert (kernel["status"], kernel["ok"]) == ("unavailable", True)
    assert "missing.log" in kernel["detail"]
    rc, line = check(capsys, *args, "--strict")
    assert rc == 1 and "UNHEALTHY: kernel log unavailable" in line, line


def test_journalctl_is_read_from_the_start_of_the_boot(tmp_path, capsys, monkeypatch):
    """The fallback where /dev/kmsg is closed: its first read must not be lost (a fake
    journalctl prints one Xid 79 line the way `journalctl -k -o short-iso-precise` does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stamp = datetime.fromtimestamp(time.time() - 30, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+0000")
    fake = bin_dir / "journalctl"
    fake.write_text(
        "#!/bin/sh\n"
        f"echo '{stamp} {NODE} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.'\n"
        "echo '-- cursor: s=1'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    rc, line = check(capsys, "--gpu", "none", "--kernel-log", "journalctl", "--node", NODE, *EASY_HOST)
    assert rc == 1 and "Xid 79" in line, line


# -- ledger -----------------------------------------------------------------------------------


def test_a_quarantined_node_fails_with_the_quarantines_reason(tmp_path, capsys):
    quarantine(tmp_path, gpu=None, reason="repeat offender: 2 incidents in 14 days")
    rc, line = check(capsys, *sim_args(tmp_path))
    assert rc == 1
    assert "UNHEALTHY: quarantined since " in line and "repeat offender: 2 incidents in 14 days" in line, line
    rc, line = check(capsys, *sim_args(tmp_path, node="node2"))  # another node of the data dir
    assert rc == 0, line
    clear_node(tmp_path, NODE, by="test")
    assert check(capsys, *sim_args(tmp_path))[0] == 0


def test_a_quarantined_gpu_fails_its_node(tmp_path, capsys):
    quarantine(tmp_path, gpu=5, reason="Xid 48 under job B")
    rc, line = check(capsys, *sim_args(tmp_path))
    assert rc == 1 and "quarantined GPU 5 since " in line and "Xid 48 under job B" in line, line


def test_the_ledger_is_read_from_the_environments_data_dir(tmp_path, capsys, monkeypatch):
    quarantine(tmp_path, gpu=None)
    monkeypatch.setenv("TRIAGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TRIAGE_NODE", NODE)
    rc, line = check(capsys, "--gpu", "none", "--kernel-log", "none", *EASY_HOST)
    assert rc == 1 and f"{NODE} UNHEALTHY: quarantined" in line, line


# -- host -------------------------------------------------------------------------------------


def test_too_little_free_disk_fails_naming_the_path(tmp_path, capsys):
    disk = tmp_path / "scratch"
    disk.mkdir()
    args = sim_args(tmp_path, "--disk", str(disk), "--min-free-disk-gb", "100000")
    rc, line = check(capsys, *args)
    assert rc == 1
    assert f"UNHEALTHY: disk {tmp_path} " in line and "GB free < 100000 GB" in line, line
    rc, out = check_json(capsys, *args)
    disk_check = out["checks"][3]
    assert disk_check["status"] == "fail"
    assert f"disk {disk} " in disk_check["detail"]  # --disk, and the data dir's: always checked
    assert "disk / " not in disk_check["detail"]  # --disk replaces /


def test_a_disk_path_that_cannot_be_read_fails(tmp_path, capsys):
    gone = tmp_path / "mnt" / "lustre"
    rc, line = check(capsys, *sim_args(tmp_path, "--disk", str(gone)))
    assert rc == 1 and f"disk {gone} not readable" in line, line


def test_too_little_available_memory_fails(tmp_path, capsys):
    rc, line = check(capsys, *sim_args(tmp_path), "--min-free-mem-gb", "100000")
    assert rc == 1 and "UNHEALTHY: memory " in line and "available < 100000 GB" in line, line


# -- output -----------------------------------------------------------------------------------


def test_json_has_one_entry_per_check(tmp_path, capsys):
    rc, out = check_json(capsys, *sim_args(tmp_path))
    assert rc == 0
    assert set(out) == {"node", "healthy", "exit_code", "reason", "strict", "seconds", "checks"}
    assert (out["node"], out["healthy"], out["exit_code"]) == (NODE, True, 0)
    assert [c["name"] for c in out["checks"]] == CHECK_NAMES
    for c in out["checks"]:
        assert set(c) == {"name", "ok", "status", "detail", "seconds"}
        assert c["ok"] is True and c["status"] == "ok" and c["detail"]
        assert isinstance(c["seconds"], float) and c["seconds"] >= 0
    assert out["checks"][0]["detail"] == "8 simulated GPU(s) healthy"

    fault(tmp_path, 4, "xid", 79)
    rc, out = check_json(capsys, *sim_args(tmp_path))
    assert (rc, out["healthy"], out["exit_code"]) == (1, False, 1)
    gpu = out["checks"][0]
    assert (gpu["ok"], gpu["status"]) == (False, "fail") and gpu["detail"].startswith("GPU 4 lost")
    assert out["reason"].startswith(f"triage health-check: {NODE} UNHEALTHY: GPU 4 lost")
    assert [c["ok"] for c in out["checks"][1:]] == [True] * 4


def test_the_reason_is_one_short_line_however_much_is_wrong(tmp_path, capsys):
    for gpu in range(8):
        fault(tmp_path, gpu, "xid", 79)
    quarantine(tmp_path, gpu=None, reason="a long reason\nwith a newline " + "x" * 500)
    rc, line = check(capsys, *sim_args(tmp_path))
    assert rc == 1
    assert len(line) <= health_check.REASON_MAX_CHARS and line.endswith("...")
    assert line.startswith(f"triage health-check: {NODE} UNHEALTHY: GPU 0 lost")


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--min-free-disk-gb", "-1"], "--min-free-disk-gb must be a number of GB >= 0, got -1.0"),
        (["--min-free-mem-gb", "nan"], "--min-free-mem-gb must be a number of GB >= 0, got nan"),
        (["--expect-gpus", "-2"], "--expect-gpus must be >= 0, got -2"),
        (["--sim-gpus", "0"], "--sim-gpus must be between 1 and 16, got 0"),
        (["--node", "../etc"], "bad node name '../etc' (--node)"),
        (["--kernel-log", ""], "--kernel-log needs a value"),
    ],
)
def test_bad_flag_values_exit_2_with_the_reason(tmp_path, capsys, flags, message):
    rc = main(["health-check", "--gpu", "sim", "--data-dir", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("triage health-check: error: ") and message in err, err


def test_a_missing_data_dir_for_simulated_gpus_is_refused_not_made(tmp_path, capsys):
    rc = main(["health-check", "--gpu", "sim", "--data-dir", str(tmp_path / "nope"), "--node", "node0"])
    assert rc == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()  # a check only reads


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--gpu", "cuda"], "argument --gpu: invalid choice: 'cuda'"),
        (["--min-free-disk-gb", "lots"], "argument --min-free-disk-gb: invalid float value: 'lots'"),
    ],
)
def test_unparseable_flags_exit_2(capsys, flags, message):
    with pytest.raises(SystemExit) as exc:
        main(["health-check", *flags])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


# -- the Slurm wrapper ------------------------------------------------------------------------


def test_the_slurm_wrapper_is_valid_bash_and_executable():
    assert os.access(WRAPPER, os.X_OK)
    out = subprocess.run(["bash", "-n", str(WRAPPER)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def _run_wrapper(tmp_path: Path, data_dir: Path, triage: str) -> tuple[int, str]:
    """The wrapper as slurmd runs it, with `scontrol` and `logger` faked: what scontrol got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "scontrol.calls"
    for tool, body in (("scontrol", f'printf "%s\\n" "$@" > {calls}\n'), ("logger", "exit 0\n")):
        (bin_dir / tool).write_text("#!/bin/sh\n" + body)
        (bin_dir / tool).chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "SLURMD_NODENAME": NODE,
        "TRIAGE": triage,
        "TRIAGE_DATA_DIR": str(data_dir),
        "TRIAGE_HEALTH_ARGS": "--gpu sim " + " ".join(EASY_HOST),
    }
    out = subprocess.run(["bash", str(WRAPPER)], env=env, capture_output=True, text=True, timeout=60)
    return out.returncode, calls.read_text() if calls.exists() else ""


@pytest.fixture
def triage_command(tmp_path):
    """`triage` as the wrapper calls it: this venv's CLI."""
    path = tmp_path / "triage"
    path.write_text(f'#!/bin/sh\nexec {" ".join(TRIAGE_CLI)} "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_the_slurm_wrapper_drains_an_unhealthy_node_with_the_checks_line(tmp_path, triage_command):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rc, calls = _run_wrapper(tmp_path, data_dir, triage_command)
    assert (rc, calls) == (0, "")  # healthy: the job starts, nothing is drained
    fault(data_dir, 1, "xid", 79)
    rc, calls = _run_wrapper(tmp_path, data_dir, triage_command)
    assert rc == 1
    update, node, state, reason = calls.splitlines()
    assert (update, node, state) == ("update", f"nodename={NODE}", "state=drain")
    assert reason.startswith(f"reason=triage health-check: {NODE} UNHEALTHY: GPU 1 lost (Xid 79 at ")


def test_the_slurm_wrapper_drains_when_the_check_cannot_run(tmp_path):
    rc, calls = _run_wrapper(tmp_path, tmp_path, str(tmp_path / "no-such-triage"))
    assert rc == 1
    assert "reason=triage health-check could not run (exit 127)" in calls


def test_the_healthy_line_names_what_was_skipped(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./triage-data: no ledger to read
    rc, line = check(capsys, "--gpu", "none", "--kernel-log", "none", "--node", NODE, *EASY_HOST)
    assert rc == 0
    assert line == f"triage health-check: {NODE} healthy: disk, memory ok; skipped: gpu, kernel_log, ledger"
