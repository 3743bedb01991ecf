"""The kernel-log collector: tailing, unreadable sources, /dev/kmsg records, OOM de-duplication."""

import logging
import os

import pytest

from triage.collectors.kernel_log import KernelLogCollector, KernelLogConfig, KmsgSource
from triage.collectors.records import GpuEvent, GpuIdentity, KernelLogEvent, Unavailable

XID = (
    "2024-08-09T13:32:56.000000+00:00 node0 kernel: NVRM: Xid (PCI:0000:18:00): 48, pid=7, name=python, DBE\n"
)
GPUS = [GpuIdentity(gpu=0, uuid="GPU-a", pci_bus_id="0000:18:00")]


def kernel_events(records):
    return [r for r in records if isinstance(r, KernelLogEvent)]


def test_file_is_tailed_from_its_end_and_torn_lines_wait(tmp_path):
    log_file = tmp_path / "k.log"
    log_file.write_text(XID)  # before the collector starts: not reported
    c = KernelLogCollector(KernelLogConfig(kernel_log=str(log_file)), "node0", GPUS)
    assert c.collect(1.0) == []
    with open(log_file, "a") as fh:
        fh.write(XID + XID[:30])
    recs = c.collect(2.0)
    assert [(e.kind, e.xid, e.gpu) for e in kernel_events(recs)] == [("xid", 48, 0)]
    assert [(e.source, e.uuid) for e in recs if isinstance(e, GpuEvent)] == [("kernel_log", "GPU-a")]
    with open(log_file, "a") as fh:
        fh.write(XID[30:])
    assert len(kernel_events(c.collect(3.0))) == 1  # the torn line, once complete


def test_truncated_file_is_read_again_from_its_start(tmp_path):
    log_file = tmp_path / "k.log"
    log_file.write_text(XID * 3)
    c = KernelLogCollector(KernelLogConfig(kernel_log=str(log_file)), "node0", GPUS)
    log_file.write_text(XID)
    assert len(kernel_events(c.collect(1.0))) == 1


def test_one_oom_kill_printed_twice_is_one_event(tmp_path):
    log_file = tmp_path / "k.log"
    log_file.touch()
    c = KernelLogCollector(KernelLogConfig(kernel_log=str(log_file)), "node0")
    log_file.write_text(
        "[2059991.491436] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
        "mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=25315,uid=0\n"
        "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244kB\n"
        "[2059999.000000] Out of memory: Killed process 25400 (python3) total-vm:53312244kB\n"
    )
    assert [e.pid for e in kernel_events(c.collect(1.0))] == [25315, 25400]


def test_unreadable_kernel_log_is_unavailable_at_each_collect_and_warned_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    c = KernelLogCollector(KernelLogConfig(kernel_log=str(tmp_path / "missing.log")), "node0")
    for t in (1.0, 2.0):
        (rec,) = c.collect(t)
        assert isinstance(rec, Unavailable) and rec.source == "kernel_log" and rec.time == t
        assert "missing.log" in rec.reason
    assert sum("kernel log unavailable" in r.message for r in caplog.records) == 1


def test_a_source_that_fails_later_is_reported_then_recovers():
    class Flaky:
        description = "flaky"
        fail = False

        def read(self):
            if self.fail:
                raise PermissionError("Operation not permitted")
            return ["NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus."]

        def close(self):
            pass

    src = Flaky()
    c = KernelLogCollector(KernelLogConfig(), "node0", GPUS, source=src)
    src.fail = True
    (rec,) = c.collect(1.0)
    assert isinstance(rec, Unavailable) and "not permitted" in rec.reason
    src.fail = False
    recs = c.collect(2.0)
    assert not [r for r in recs if isinstance(r, Unavailable)]
    assert [e.xid for e in kernel_events(recs)] == [79]


def test_none_reads_nothing_and_reports_nothing():
    assert KernelLogCollector(KernelLogConfig(kernel_log="none"), "node0").collect(1.0) == []


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg not readable here")
def test_dev_kmsg_records_resume_after_a_saved_sequence_number():
    try:
        first = KmsgSource(from_start=True)
    except PermissionError:
        pytest.skip("/dev/kmsg open not permitted")
    records = first.read()
    first.close()
    assert records and all(r.split(",", 3)[1].isdigit() and ";" in r for r in records)
    saved = first.after_seq
    assert saved == int(records[-1].split(",")[1])
    resumed = KmsgSource(after_seq=saved)
    assert all(int(r.split(",")[1]) > saved for r in resumed.read())
    resumed.close()
    tail = KmsgSource()  # from the current end: nothing old comes back
    assert all(int(r.split(",")[1]) > saved for r in tail.read())
    tail.close()
