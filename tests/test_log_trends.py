"""What a log shows only across lines: a loss spike in plain metric lines (numerical instability,
weakly: never noise, other series such as validation, loss scale, other ranks or the end-of-run
mean, a loss still coming down or starting over; any other failure line outranks it), GPU peer
links a P2P test measures broken (PCIe), peers' collectives timing out while a rank still
prepares its data (the input pipeline's, not the timeout's), and a launcher stopped after its
job already failed (a consequence, not a preemption)."""

import random

from triage.analyzers.log_classifier import LogClassifier
from triage.analyzers.log_trends import SPIKE_STRENGTH
from triage.taxonomy import Category

MEGATRON = (
    " iteration    {it:5d}/  311541 | consumed samples:     {s:8d} | elapsed time per iteration (ms): "
    "22306.6 | learning rate: 9.850E-05 | global batch size:  1024 | lm loss: {loss:.6E} | "
    "loss scale: {scale:.1f} | grad norm: 0.000 | number of skipped iterations:   0 |"
)
WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out."
)


def _megatron(losses: list[float], scale: float = 32768.0) -> list[str]:
    return [MEGATRON.format(it=29000 + 10 * i, s=1024 * i, loss=v, scale=scale) for i, v in enumerate(losses)]


def _verdict(lines: list[str]):
    return LogClassifier("t").feed_all(lines).verdict()


def test_a_megatron_lm_loss_that_jumps_is_numerical_instability_with_its_line_as_evidence() -> None:
    lines = _megatron([2.7759, 2.7728, 2.7681, 7.3437, 8.7159, 7.6541])
    v = _verdict(lines)
    assert v.category is Category.NUMERICAL_INSTABILITY
    assert v.confidence >= SPIKE_STRENGTH and v.confidence < 0.7
    assert "lm loss: 7.343700E+00" in v.evidence[0].text and v.evidence[0].line == 4
    assert "spiked to 7.344" in v.summary and "2.77" in v.summary


def test_spikes_in_the_hf_trainer_lightning_nemo_and_nanogpt_forms() -> None:
    hf = [
        f"{{'loss': {v}, 'grad_norm': 1.2, 'learning_rate': 2e-05, 'epoch': 0.{i}}}"
        for i, v in enumerate([1.92, 1.88, 1.85, 1.83, 5.1])
    ]
    lightning = [
        f"Epoch 0:  {i}%|#| {i}/100 [00:0{i}<00:10, 9.8it/s, v_num=3, train_loss={v}]"
        for i, v in enumerate([0.95, 0.93, 0.91, 2.4])
    ]
    lightning_step = [
        f"Epoch 0:  {i}%| | {i}/100 [00:0{i}, train_loss_step={v}]"
        for i, v in enumerate([0.52, 0.50, 0.51, 1.9])
    ]
    nemo = [
        f"Epoch 0: : {i}it [00:{i:02d}, reduced_train_loss={v}, global_step={i}.0]"
        for i, v in enumerate([2.41, 2.39, 2.40, 6.95])
    ]
    nanogpt = [
        f"iter {i * 10}: loss {v:.4f}, time 101.23ms, mfu 38.20%"
        for i, v in enumerate([3.31, 3.29, 3.30, 3.28, 3.27, 9.95])
    ]
    for lines in (hf, lightning, lightning_step, nemo, nanogpt):
        assert _verdict(lines).category is Category.NUMERICAL_INSTABILITY, lines[-1]


def test_noise_a_falling_loss_and_a_steady_higher_rank_are_no_spike() -> None:
    rng = random.Random(7)
    noisy = _megatron([2.3 + rng.uniform(-0.35, 0.35) for _ in range(200)])
    falling = _megatron([10.9 * 0.93**i for i in range(60)])
    # two ranks printing their own local losses, one consistently higher than the other
    ranks = [
        f"[rank{r}]: step {i} loss: {(1.1 if r == 0 else 3.4) + 0.01 * (i % 3):.3f}"
        for i in range(30)
        for r in (0, 1)
    ]
    for lines in (noisy, falling, ranks):
        assert _verdict(lines).category is Category.UNKNOWN


def test_other_series_on_metric_lines_are_not_the_training_loss() -> None:
    # validation loss higher than training loss, a loss scale that grows, a KL term that jumps
    lines = []
    for i in range(10):
        lines.append(f"step {i} | loss: 2.{50 - i} | loss scale: {2 ** (10 + i)}")
        lines.append(f" validation loss at iteration {i} | lm loss value: 7.17E+00 |")
        lines.append(f"{{'eval_loss': 9.{i}, 'epoch': {i}}}")
        lines.append(f"step {i} kl_loss: {0.01 * 4**i:.3f}")
    assert _verdict(lines).category is Category.UNKNOWN
    # a loss that crosses zero (an RL objective): no ratio to spike by
    rl = [f"step {i} | policy loss: {v}" for i, v in enumerate([0.02, -0.01, 0.03, 0.012, 0.011, 0.05, 0.4])]
    assert _verdict(rl).category is Category.UNKNOWN
    # the HF Trainer's end-of-run summary: the mean over the whole run, above the last losses
    hf = [
        f"{{'loss': {2.5 * 0.95**i:.4f}, 'learning_rate': 2e-05, 'epoch': {i / 20:.2f}}}" for i in range(60)
    ]
    hf += [
        "{'train_runtime': 3601.2, 'train_samples_per_second': 8.9, 'train_loss': 0.7262, 'epoch': 3.0}",
        "***** train metrics *****",
        "  train_loss               =     0.7262",
    ]
    assert _verdict(hf).category is Category.UNKNOWN


def test_a_restart_from_scratch_and_losses_near_zero_are_no_spike() -> None:
    # a requeued run that starts again from step 0: its loss starts over
    first = [f"step {i} loss: {3.1 - 0.01 * (i - 100):.3f}" for i in range(100, 130)]
    again = [f"step {i} loss: {10.9 - 0.2 * i:.3f}" for i in range(10)]
    tiny = [f"step {i} loss: {v}" for i, v in enumerate([0.0012, 0.0011, 0.0013, 0.0010, 0.0041])]
    for lines in (first + again, tiny):
        assert _verdict(lines).category is Category.UNKNOWN, lines


def test_a_spike_is_outranked_even_by_symptoms_and_names_the_rank_that_printed_it() -> None:
    losses = [f"{{'loss': {v}, 'epoch': 0.{i}}}" for i, v in enumerate([1.9, 1.85, 1.8, 4.0, 1.7])]
    timeouts = [WATCHDOG.format(r=r) for r in (1, 2, 3)]
    assert _verdict(losses + timeouts).category is Category.COLLECTIVE_TIMEOUT
    ranks = [
        f"[rank{r}]: step {i} loss: {(9.5 if (r, i) == (3, 7) else 2.0 + 0.01 * (i % 2)):.2f}"
        for i in range(8)
        for r in range(4)
    ]
    v = _verdict(ranks)
    assert v.category is Category.NUMERICAL_INSTABILITY and v.culprit.rank == 3


def test_a_named_cause_after_the_spike_outranks_it() -> None:
    lines = _megatron([2.1, 2.0, 2.05, 6.9]) + [
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a "
        "total capacity of 79.15 GiB of which 1.06 GiB is free."
    ]
    v = _verdict(lines)
    assert v.category is Category.GPU_OOM and v.culprit.rank == 5


def test_peers_timing_out_while_a_rank_still_tokenizes_is_the_data_preparation_on_that_rank() -> None:
    bar = "Running tokenizer on dataset:  45%|####5     | 1000/2222 [29:55<30:01, 1.1 examples/s]"
    v = _verdict([bar, WATCHDOG.format(r=1), WATCHDOG.format(r=2), WATCHDOG.format(r=3)])
    assert v.category is Category.DATA_PIPELINE_ERROR
    assert v.culprit.rank == 0  # the one rank not waiting
    assert "45%" in v.evidence[0].text and "Running tokenizer" in v.summary
    named = _verdict(["Rank 2, Map (num_proc=16):  30% | 48000/157712 [07:55<02:22]", WATCHDOG.format(r=5)])
    assert named.category is Category.DATA_PIPELINE_ERROR and named.culprit.rank == 2


def test_a_timeout_after_preparation_finished_or_while_loading_a_model_stays_a_timeout() -> None:
    timeout = [WATCHDOG.format(r=1)]
    done = [
        "Running tokenizer on dataset:  45%|####5  | 1000/2222",
        "Running tokenizer on dataset: 100%|#####| 2222/2222",
    ]
    # tqdm's updates joined by carriage returns on one line: the last one counts
    done_cr = [
        "Running tokenizer on dataset:   0%|  | 0/2222\rRunning tokenizer on dataset:  45%|##  | 1000/2222\r"
        "Running tokenizer on dataset: 100%|#####| 2222/2222"
    ]
    # bars of other work: a model's shards loading, an evaluation metric, a checkpoint converted
    loading = [
        "Loading checkpoint shards:  50%|#####     | 1/2 [00:30<00:30]",
        "Computing mAP:  45%|####5     | 45/100 [00:10<00:10]",
        "Checkpoint preprocessing:  45%|####5     | 45/100",
    ]
    # a bar left short of 100% (leave=False, a cut log), then training ran
    stale = ["Map (num_proc=8):  99%|#########9| 990/1000"]
    stale += [f"{{'loss': {2.0 - 0.01 * i:.2f}, 'epoch': 0.{i}}}" for i in range(5)]
    # a peer timed out before the bar started: the bar did not hold it up
    after = timeout + ["Running tokenizer on dataset:  45%|####5  | 1000/2222", WATCHDOG.format(r=2)]
    for lines in (done + timeout, done_cr + timeout, loading + timeout, stale + timeout, after):
        assert _verdict(lines).category is Category.COLLECTIVE_TIMEOUT, lines


def _p2p(title: str, rows: list[list[float]]) -> list[str]:
    n = len(rows)
    return [title, "   D\\D" + "".join(f"{j:7d}" for j in range(n))] + [
        f"{i:6d} " + " ".join(f"{v:7.2f}" for v in row) for i, row in enumerate(rows)
    ]


def test_a_p2p_test_that_measures_a_broken_peer_link_is_a_pcie_fault_and_a_healthy_one_is_nothing() -> None:
    enabled = "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)"
    disabled = _p2p("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", [[673.2, 13.1], [12.9, 673.2]])
    slow = _p2p(enabled, [[673.4, 2.6], [2.1, 672.3]])
    fast = _p2p(enabled, [[673.4, 24.9], [25.1, 672.3]])
    stuck = _p2p("   P2P=Enabled Latency (P2P Writes) Matrix (us)", [[4.95, 49206.88], [49206.62, 2.08]])
    quick = _p2p("   P2P=Enabled Latency (P2P Writes) Matrix (us)", [[4.95, 12.4], [12.1, 2.08]])
    v = _verdict(disabled + slow)
    assert v.category is Category.PCIE_ERROR and "2.6 GB/s" in v.summary and "13.1" in v.summary
    assert v.culprit.gpu == 0
    assert _verdict(stuck).category is Category.PCIE_ERROR
    # under srun --label every line carries its task's number
    assert _verdict([f"0: {line}" for line in stuck]).category is Category.PCIE_ERROR
    # healthy matrices; and an enabled bandwidth with no disabled baseline to judge it by
    baseline_slow = _p2p("P2P=Disabled Latency Matrix (us)", [[4.9, 20000.0], [20000.0, 2.1]])
    for lines in (disabled + fast, quick, slow, baseline_slow):
        assert _verdict(lines).category is Category.UNKNOWN, lines


def test_a_launcher_stopped_after_the_job_failed_is_not_a_preemption() -> None:
    """Slurm, or the peer node's agent, stops a step whose rank already failed: the stop is a
    consequence. The same signal with nothing before it is the stop from outside it says."""
    failed = [
        WATCHDOG.format(r=1),
        "E0101 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 1 "
        "(pid: 4242) of binary: /usr/bin/python",
        "node2: W0101 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, shutting down "
        "workers",
    ]
    assert _verdict(failed).category is Category.COLLECTIVE_TIMEOUT
    assert _verdict(failed[2:]).category is Category.PREEMPTION


def test_the_one_rank_a_log_shows_owns_its_unprefixed_error_but_not_a_transport_failure() -> None:
    """A log cut to one rank's output (its traceback's frames prefixed, the error line not): that
    rank's error. A network or rendezvous failure the rank only reports names no culprit."""
    assertion = (
        "/opt/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [7354,0,0], thread: "
        '[64,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.'
    )
    frames = [
        "[rank104]: Traceback (most recent call last):",
        '[rank104]:   File "/x/train.py", line 10, in <module>',
    ]
    v = _verdict([assertion, *frames])
    assert v.category is Category.USER_CODE_ERROR and v.culprit.rank == 104
    refused = (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
        "(192.168.121.122, 1040)."
    )
    transport = _verdict(["[rank3]: step 1 done", refused])
    assert transport.category is Category.RENDEZVOUS_ERROR and transport.culprit.rank is None


def test_a_progress_bar_written_to_a_file_is_read_update_by_update() -> None:
    """tqdm and Lightning write their updates joined by carriage returns: one line holds every
    update of an epoch, each with its loss, and a validation bar may sit among them."""
    updates = [
        f"Epoch 0:  {i}%|#| {i}/100 [00:0{i}<00:10, 9.8it/s, v_num=3, loss={v}]"
        for i, v in enumerate([0.95, 0.93, 0.91, 0.92, 2.9, 1.1])
    ]
    updates.insert(3, "Validation DataLoader 0:  50%|#####| 5/10 [00:01<00:01]")
    v = _verdict(["\r".join(updates)])
    assert v.category is Category.NUMERICAL_INSTABILITY and "spiked to 2.9" in v.summary
    steady = [
        f"Epoch 0:  {i}%|#| {i}/100 [00:0{i}<00:10, loss={0.9 + 0.01 * (i % 3):.2f}]" for i in range(60)
    ]
    assert _verdict(["\r".join(steady)]).category is Category.UNKNOWN


METRIC = (
    "Train Epoch: [0]  [{it:5d}/10175]  eta: 2 days, 11:04:48  lr: 0.000002  loss: 6.2285  "
    "time: {step:.4f}  data: {data:.4f}  max mem: 10768"
)
MMENGINE = "Epoch(train) [1][{it:4d}/2000]  lr: 1.0e-04  eta: 0:40:00  time: {step:.4f}  data_time: {data:.4f}  loss: 1.2"


def test_steps_spent_mostly_waiting_for_data_are_the_input_pipeline_but_the_first_iteration_is_not() -> None:
    slow = [METRIC.format(it=it, step=40.19, data=38.06) for it in (200, 210)]
    v = _verdict(slow)
    assert v.category is Category.DATA_PIPELINE_ERROR and v.confidence < 0.7
    assert "38.06 s of a 40.19 s step at iteration 200 (95%)" in v.summary
    mm = [MMENGINE.format(it=it, step=0.9, data=0.7) for it in (50, 100)]
    assert _verdict(mm).category is Category.DATA_PIPELINE_ERROR
    # the workers' start-up at iteration 0, a fast pipeline, and a wait too short to matter
    assert _verdict([METRIC.format(it=0, step=12.0, data=11.0)]).category is Category.UNKNOWN
    fast = [METRIC.format(it=it, step=1.81, data=0.0076) for it in (10, 20, 30)]
    assert _verdict(fast).category is Category.UNKNOWN
    assert _verdict([MMENGINE.format(it=50, step=0.05, data=0.04)]).category is Category.UNKNOWN
    # a metric line wrapped in a paste keeps its iteration a line above; without one, the first
    # reading is taken for the start-up
    wrapped = ["Train Epoch: [0]  [  200/10175]  eta: 2 days", "lr: 0.000002", "time: 40.1906  data: 38.0570"]
    assert _verdict(wrapped).category is Category.DATA_PIPELINE_ERROR
    assert _verdict(["time: 40.1906  data: 38.0570"]).category is Category.UNKNOWN
    # any named failure outranks it
    crash = slow + ["RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed."]
    assert _verdict(crash).category is not Category.DATA_PIPELINE_ERROR or "killed" in _verdict(crash).summary


def _timed_out(rank: int, seq: int, op: str, numel: int, prefix: str = "", pg: str | None = "0") -> list[str]:
    lines = [
        f"{prefix}[rank{rank}]:[E918 19:29:24.436955737 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
        "Timeout(ms)=600000) ran for 600074 milliseconds before timing out."
    ]
    if pg is not None:  # the watchdog's next line names the group the work belongs to
        lines.append(
            f"[rank{rank}]:[E918 19:29:24.440481846 ProcessGroupNCCL.cpp:2303] [PG ID {pg} PG GUID {pg}(default_pg) "
            f"Rank {rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued "
            f"work: {seq + 1}, last completed work: {seq - 1}"
        )
    return lines


def test_ranks_timing_out_in_different_collectives_at_one_sequence_number_are_a_desync_in_the_code() -> None:
    bar = "Train:  20%|##        | 375/1881 [3:40:16<14:52:25, 35.55s/it]"
    for lines in (
        _timed_out(3, 7219, "BROADCAST", 64, prefix=bar) + _timed_out(2, 7219, "BROADCAST", 24084544),
        _timed_out(0, 3437, "ALLREDUCE", 4311252) + _timed_out(1, 3437, "ALLREDUCE", 1),
        _timed_out(5, 12, "_ALLGATHER_BASE", 100, pg="2") + _timed_out(1, 12, "ALLREDUCE", 100, pg="2"),
        # the older form names the group on the timeout's own line
        [
            "[rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 0] Process group watchdog thread terminated with "
            "exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, "
            "NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600002 milliseconds before timing out.",
            "[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 1] Process group watchdog thread terminated with "
            "exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, "
            "NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600002 milliseconds before timing out.",
        ],
    ):
        v = _verdict(lines)
        assert v.category is Category.USER_CODE_ERROR, lines
        assert "different collectives at sequence number" in v.summary
        assert v.culprit.rank is None  # each reporter is one party of it
    # the same collective on every rank is a plain timeout; sizes that differ by rank of their
    # own accord (all-to-all), other sequence numbers, another group's numbering (a
    # tensor-parallel group's rank 1 is often global rank 1 too), or groups not named
    for lines in (
        [line for r in range(4) for line in _timed_out(r, 88, "ALLREDUCE", 4096)],
        _timed_out(0, 216, "ALLTOALL_BASE", 1379328) + _timed_out(1, 216, "ALLTOALL_BASE", 1572864),
        _timed_out(0, 10, "ALLREDUCE", 5) + _timed_out(1, 11, "ALLREDUCE", 7),
        _timed_out(0, 3, "ALLREDUCE", 1) + _timed_out(1, 3, "_ALLGATHER_BASE", 19008, pg="3"),
        _timed_out(0, 3, "ALLREDUCE", 1, pg=None) + _timed_out(1, 3, "_ALLGATHER_BASE", 19008, pg=None),
    ):
        assert _verdict(lines).category is Category.COLLECTIVE_TIMEOUT, lines
