"""One supervised job: attempts launched, watched, stopped, diagnosed and acted on.

Detection, per attempt: the launcher's exit; a rank's exit while other ranks still run (within
`RANK_EXIT_GRACE_S`, long before the survivors' collectives time out); no step progress for the
hang threshold. Then the attempt is stopped for good (SIGTERM, SIGKILL after `--grace`, and a
check that none of its processes is left), its telemetry drained into the store, the analyzers'
verdict recorded as an incident, and `policy.decide` picks the next move.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from triage import display
from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import JobAnalysis
from triage.config import (
    ENV_ATTEMPT,
    ENV_AUTO_HOOKS,
    ENV_DATA_DIR,
    ENV_EXCLUDE_NODES,
    ENV_JOB_ID,
    ENV_RESUME_BEFORE_STEP,
    ENV_RUN_ID,
    ENV_SKIP_STEPS,
    EXIT_PREEMPTED,
    ConfigError,
    data_dir_from_env,
    node_name,
)
from triage.display import Status
from triage.ports import free_port
from triage.store.layout import run_log_dir, spool_node_dir, spool_nodes
from triage.store.manifest import ManifestError
from triage.store.node_health import HealthEntry, quarantined_nodes
from triage.store.schema import EVENT_RANK_EXIT, EVENT_SOURCE_SUPERVISOR
from triage.store.writer import StoreError
from triage.supervisor import slurm
from triage.supervisor.agents import Agents, agent_gpu_source, simulated_gpus_per_node, simulated_nodes
from triage.supervisor.config import SupervisorConfig
from triage.supervisor.flight_dumps import collect_dumps, dump_event_rows
from triage.supervisor.identity import JobLock, new_run_id
from triage.supervisor.observe import (
    Progress,
    RunRecord,
    analyze,
    corruption_verdict,
    ingest_pending,
    read_attempt_progress,
    read_clean_exits,
    read_reporting_ranks,
    record_accounting,
    record_attempt,
    record_output,
    record_run,
    record_scores,
    root_verdict,
    stop_event_row,
)
from triage.supervisor.policy import AttemptResult, Decision, Plan, decide
from triage.supervisor.prober import Prober
from triage.supervisor.processes import AttemptProcesses
from triage.supervisor.quarantine import QuarantineConfig, quarantine_for_verdict, quarantine_lemons
from triage.supervisor.rank_logs import AttemptLog, torchrun_log_env
from triage.supervisor.report import AttemptReport, JobReport, LiveState
from triage.supervisor.slurm import Allocation, Continuation
from triage.supervisor.step_rule import StepState, StepWatch
from triage.supervisor.stop_signals import Interrupted, StopSignals
from triage.taxonomy import Action, Category
from triage.trainer_hooks.config import auto_hooks_env
from triage.trainer_hooks.flight_recorder import DEFAULT_BUFFER_ENTRIES, ENV_BUFFER
from triage.trainer_hooks.flight_recorder import dump_dir as fr_dump_dir
from triage.trainer_hooks.spool_schema import job_dir_name, parse_segment_name
from triage.verdict import Culprit, Verdict

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A rank that exited while others still run is a failure once this much time has passed
#: without the launcher ending the job itself (ranks of a completed job exit together).
RANK_EXIT_GRACE_S = 2.0
#: Where the ranks report through Triage's hooks, a rank gone this long is judged by its own
#: records instead: a failure unless it recorded a clean exit (the agents are asked to ingest
#: first, waited for up to `_EXIT_FLUSH_WAIT_S`).
_EXIT_CHECK_S = 0.5
_EXIT_FLUSH_WAIT_S = 1.5
#: The hooks write what they buffered to the spool this often (their default flush interval,
#: and a margin): a hang is confirmed only once a step ended before it would be there.
_RANK_FLUSH_S = 1.2
#: How long ranks told of a preemption may take to save and exit before they are stopped: a
#: large model's checkpoint to shared storage takes minutes; Slurm's own deadline (the
#: preemption's GraceTime, the job's end) usually comes first and ends everything.
_PREEMPTED_SAVE_S = 300.0
#: How long the notice is offered to the attempt's step (squeue lists a step a moment after
#: srun starts it) before it goes to srun instead.
_FORWARD_FALLBACK_S = 5.0
_POLL_S = 0.25
_PROBE_S = 2.0
#: How long to wait for the agents to ingest a stopped attempt's last spool segments.
_DRAIN_S = 15.0
_DRAIN_POLL_S = 0.05
#: What a failed attempt's ranks get between SIGTERM and SIGKILL: the hooks write what they
#: buffered at least once a second (`MonitorConfig.flush_interval_s`), plus that write.
_SETTLE_S = 1.5
#: How long a hung attempt's live ranks get to dump their Flight Recorders (the monitor's
#: writer thread looks for the request every second).
_FR_WAIT_S = 5.0
#: How much earlier than the supervisor noticed it a cancelled job's ranks may have got Slurm's
#: SIGTERM, or a terminal's Ctrl-C (it signals the whole foreground process group at once).
_SIGNAL_SKEW_S = 1.0
#: How long an attempt known to report steps may take to its first one (`--startup-timeout`
#: unset).
DEFAULT_STARTUP_TIMEOUT_S = 300.0
#: A store read that has not returned after this long is said, with where it is stuck.
_BLIND_AFTER_S = 60.0
#: Steps in a row whose loss came out NaN or Inf after which an attempt is stopped and
#: diagnosed (numerical instability: roll back): a model whose weights went NaN stays so, and a
#: script that trains on wastes every step after; an overflow skipped under AMP leaves the loss
#: finite (its grad norm is the one that is not).
NONFINITE_LOSS_STEPS = 3
#: While the ranks' canaries disagree, how often (at most) the analysis is asked whether a
#: majority names a culprit (silent data corruption): a whole analysis, so not on every probe.
_CORRUPTION_CHECK_S = 5.0


class Supervisor:
    def __init__(
        self,
        cfg: SupervisorConfig,
        command: Sequence[str],
        *,
        on_update: Callable[[LiveState], None] | None = None,
        quarantine: QuarantineConfig | None = None,
    ) -> None:
        self.cfg = cfg
        self.quarantine = quarantine or QuarantineConfig()
        self.command = list(command)
        self.data_dir = data_dir_from_env(cfg.data_dir)
        self.job_id = str(cfg.job_id)
        self.run_id = new_run_id()
        self.on_update = on_update or (lambda state: None)
        self.nodes = simulated_nodes(self.command)
        self.slurm: Allocation | None = None
        self.first_attempt = 0
        self._resumed: Continuation | None = None
        self._notice_at: float | None = None  # when Slurm's SIGTERM came (wall time)
        self._ending: slurm.Ending | None = None  # why, as Slurm's controller said then
        self._requeue: tuple[str, ...] | None = None  # nodes to exclude when requeued in Slurm
        self._started = time.time()  # the run's start (an earlier incarnation's, when resumed)
        if cfg.launcher == "slurm":
            self.slurm = Allocation.from_env()
            self.nodes = list(self.slurm.nodes)
            if self.slurm.restart_count:
                self._resumed = Continuation.load(self.data_dir, self.slurm.job_id)
            if self._resumed is not None:  # a requeued job goes on with its run
                self.job_id, self.run_id = self._resumed.job_id, self._resumed.run_id
                self.first_attempt = self._resumed.next_attempt
        self.agent_nodes = cfg.agent_nodes(self.nodes)
        self.report = JobReport(self.job_id, self.run_id, str(self.data_dir), self.command)
        self._incidents: list[str] = []
        # the running attempt's rank processes, for the live view
        self._ranks_seen: set[int] = set()
        self._ranks_running: set[int] = set()
        self._stepped = False  # an attempt of this run has stored a step
        self._announced: set[tuple[str, ...]] = set()
        self._diagnosis: JobAnalysis | None = None  # the newest attempt's, for its nodes
        self._ingest_lock = threading.Lock()

    # -- the job ----------------------------------------------------------------------------
    def run(self, on_started: Callable[[], None] | None = None) -> JobReport:
        """The whole run: refused (`JobRunning`) while another supervisor runs this job id.
        `on_started` is called once the job is this supervisor's (a refused run announces no
        log folder it will never write)."""
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise ConfigError(f"--data-dir {self.data_dir} is a file, not a directory; pass a folder")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with JobLock(self.data_dir, self.job_id, self.run_id):
            return self._run(on_started)

    def signals(self) -> str:
        """What this run can see of the job before any rank has reported, for `triage run`'s
        first line."""
        always = (
            "the ranks' output (kept under "
            f"{run_log_dir(self.data_dir, self.job_id, self.run_id)}) and process exits "
            "always; PyTorch Flight Recorder dumps on a hang where Triage's hooks run"
        )
        if self.cfg.auto_hooks:
            return (
                "signals: Triage hooks where the script has them, else auto-instrumentation "
                "of torchrun ranks (optimizer steps, collectives, exceptions, exits); " + always
            )
        return "signals: Triage hooks where the script has them (auto-instrumentation off); " + always

    def _run(self, on_started: Callable[[], None] | None) -> JobReport:
        plan, record = self._begin()  # refused here where every node is quarantined
        if on_started is not None:
            on_started()
        with ExitStack() as at_end:
            with StopSignals(term_is_preemption=self.slurm is not None) as self._stops:
                agents = Agents(
                    self.agent_nodes,
                    self.data_dir,
                    gpu=agent_gpu_source(self.cfg.agent_gpu, self.command),
                    # one simulated GPU for every rank of a simulated node at least: a fault
                    # injected on GPU 3 of a 4-rank node must land on a GPU the agent samples
                    sim_gpus=max(self.cfg.sim_gpus, simulated_gpus_per_node(self.command) or 0)
                    if self.nodes and self.slurm is None
                    else self.cfg.sim_gpus,
                    interval_s=self.cfg.agent_interval,
                    place=None if self.slurm is None else slurm.agent_command,
                )
                # With the agents started, the run's end is recorded however it ends: after
                # the signal handlers are back, so that a Ctrl-C can cut it short.
                at_end.callback(self._finish, record)
                try:
                    self._attempts(agents, plan)
                except (Interrupted, KeyboardInterrupt) as exc:
                    self.report.status = Status.INTERRUPTED
                    self.report.reason = (
                        f"{self._ending.describe()}: stopped, not requeued"
                        if str(exc) == "scancel" and self._ending is not None
                        else f"stopped by {exc or 'Ctrl-C'}"
                    )
                    raise
                finally:
                    agents.stop()
        return self.report

    def _begin(self) -> tuple[Plan, RunRecord]:
        """The first attempt's plan, and the run recorded as running; refused (`ConfigError`)
        where the store cannot record it, before anything has started."""
        try:
            plan = self._placement()
            self._started = time.time() if self._resumed is None else self._resumed.start_time
            record = RunRecord(self.job_id, self.run_id, self._started, shlex.join(self.command))
            record_run(self.data_dir, record, status=Status.RUNNING)
        except (StoreError, ManifestError) as exc:
            raise ConfigError(
                f"the store in {self.data_dir} cannot record this run: {exc}. "
                "Fix or move aside the file named, or use another --data-dir"
            ) from None
        return plan, record

    def _finish(self, record: RunRecord) -> None:
        """The last spools ingested, the final analysis, and the run's end recorded."""
        self._safely("ingesting the last spools", ingest_pending, self.data_dir)
        final = self._safely(
            "the final analysis",
            analyze,
            self.data_dir,
            self.job_id,
            self.run_id,
            self._analyzer_config(),
        )
        self.report.analysis = None if final is None else final.to_dict()
        if final is not None:
            self._safely(
                "recording the run's GPU time and lost time", record_accounting, self.data_dir, final
            )
        if self.cfg.quarantine:
            lemons = self._safely(
                "the lemon-node test",
                quarantine_lemons,
                self.data_dir,
                job_id=self.job_id,
                run_id=self.run_id,
                now=time.time(),
                config=self.quarantine,
            )
            for entry in lemons or []:
                log.warning("quarantined %s for later jobs: %s", entry.node, entry.reason)
        self._safely(
            "recording the run's end",
            record_run,
            self.data_dir,
            record,
            status=self.report.status,
            reason=self.report.reason,
            end_time=time.time(),
        )

    def _placement(self) -> Plan:
        """The first attempt's plan: the job's nodes the ledger holds quarantined left out.
        Refused (`ConfigError`) where that leaves none. Without simulated nodes the job's
        placement is the launcher's: every quarantined node goes into TRIAGE_EXCLUDE_NODES."""
        carried = () if self._resumed is None else tuple(self._resumed.excluded_nodes)
        if not self.cfg.quarantine:
            return Plan(excluded_nodes=carried)
        held = quarantined_nodes(self.data_dir)
        out = [n for n in (self.nodes or sorted(held)) if n in held]
        if self.nodes and len(out) == len(self.nodes):
            raise ConfigError(
                "every node of this job is quarantined: "
                + "; ".join(f"{n} ({_why(held[n])})" for n in out)
                + ". Return one to service with `triage nodes clear NODE` once it is repaired, "
                "or run with --no-quarantine"
            )
        # the name the ranks will record as theirs: TRIAGE_NODE where it is set, else the host's
        host = node_name()
        if not self.nodes and host in held:
            # a launcher of this host's own (torchrun, a plain script) starts its ranks here,
            # whatever TRIAGE_EXCLUDE_NODES says
            raise ConfigError(
                f"this host ({host}) is quarantined ({_why(held[host])}) and the command starts "
                f"its ranks here. Return it to service with `triage nodes clear {host}` once it is "
                "repaired, or run with --no-quarantine (a burn-in run)"
            )
        left = (
            f"; the job runs on {len(self.nodes) - len(out)} of its {len(self.nodes)} nodes"
            if self.nodes
            else ""
        )
        for node in out:
            self.report.quarantined_at_start[node] = _why(held[node])
            if self.nodes:
                log.warning(
                    "leaving %s out: quarantined (%s)%s; `triage nodes clear %s` returns it",
                    node,
                    _why(held[node]),
                    left,
                    node,
                )
            else:  # the launcher places the ranks: it is told, not made to
                log.warning(
                    "%s is quarantined (%s): named in TRIAGE_EXCLUDE_NODES for the launcher to leave "
                    "out; `triage nodes clear %s` returns it",
                    node,
                    _why(held[node]),
                    node,
                )
        excluded = tuple(dict.fromkeys([*carried, *out]))
        self.report.excluded_nodes = list(excluded)
        return Plan(excluded_nodes=excluded)

    def _attempts(self, agents: Agents, plan: Plan) -> None:
        history: list[AttemptResult] = []
        attempt = self.first_attempt
        while True:
            result, report, verdict = self._attempt(attempt, plan, agents, history[-1] if history else None)
            history.append(result)
            nodes = self.nodes or self._job_nodes(self._diagnosis)
            decision = decide(
                history,
                nodes=nodes,
                plan=plan,
                max_restarts=self.cfg.max_restarts,
                backoff_s=self.cfg.backoff,
            )
            if decision.restart and report.survivors:
                decision = replace(
                    decision,
                    restart=False,
                    final_status=Status.FAILED,
                    reason=(
                        f"{len(report.survivors)} process(es) of attempt {attempt} outlived SIGKILL "
                        f"({', '.join(s.split()[0] for s in report.survivors)}): not starting "
                        f"attempt {attempt + 1} beside them. Check them with `ps -o pid,stat,wchan` "
                        "(state D: stuck in the kernel, often a GPU or filesystem hang; the node may "
                        "need a reboot), then run the job again"
                    ),
                )
            self._act(report, decision, verdict)
            if not decision.restart:
                self.report.status = decision.final_status or Status.FAILED
                self.report.reason = decision.reason
                return
            plan = _leave_out(decision.plan, report.quarantine, nodes)
            self.report.excluded_nodes = list(plan.excluded_nodes)
            if self._requeue_in_slurm(attempt, decision, plan, verdict):
                return
            self._show(attempt, f"restarting in {decision.backoff_s:.0f} s: {decision.reason}")
            deadline = time.monotonic() + decision.backoff_s
            while time.monotonic() < deadline and not self._stops.preemption:
                self._stops.check()
                time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
            if self._stops.preemption and self._requeue_in_slurm(attempt, decision, plan, verdict):
                return  # Slurm's notice came while waiting to restart
            attempt += 1

    def _cancel_step(self, name: str) -> None:
        """The attempt's srun is gone; make sure its step's tasks on every node are too."""
        if self.slurm is not None:
            self._safely("cancelling the attempt's Slurm step", slurm.cancel_steps, self.slurm.job_id, name)

    def _requeue_in_slurm(
        self, attempt: int, decision: Decision, plan: Plan, verdict: Verdict | None
    ) -> bool:
        """Whether the next attempt goes on in the job's next Slurm incarnation: after a
        preemption, or when leaving the culprit's node out leaves fewer than --slurm-min-nodes
        of the allocation (the policy restarts on the last node left; Slurm can do better and
        place the job elsewhere). The requeue itself (`requeue_if_decided`) comes after the
        run's end is recorded: it ends this process."""
        if self.slurm is None:
            return False
        out = list(plan.excluded_nodes)
        culprit = None if verdict is None else verdict.culprit.node
        spec = None if verdict is None else verdict.category.spec
        if (
            culprit is not None
            and spec is not None
            and (spec.action is Action.RESTART_EXCLUDING_NODE or spec.exclude_culprit_if_found)
            and culprit not in out
        ):
            out.append(culprit)
        remaining = [n for n in self.nodes if n not in out]
        preempted = decision.action is Action.CHECKPOINT_AND_REQUEUE or self._stops.preemption
        if not preempted and len(remaining) >= self.cfg.slurm_min_nodes:
            return False
        if self._ending is not None and self._ending.kind == "time_limit":
            # Slurm requeues no job past its time limit (and ends this process in KillWait)
            self.report.status = Status.PREEMPTED
            self.report.reason = (
                f"{self._ending.describe()}: the ranks were asked to checkpoint; Slurm requeues no job "
                "past its limit, so submit it again to go on from the last checkpoint, or give the "
                "job `--signal=B:TERM@120 --requeue` so that Triage requeues it before the limit"
            )
            return True
        plan = replace(plan, excluded_nodes=tuple(out))
        Continuation(self.job_id, self.run_id, self._started, attempt + 1, list(plan.excluded_nodes)).save(
            self.data_dir, self.slurm.job_id
        )
        self._requeue = plan.excluded_nodes
        self.report.status = Status.REQUEUED
        left_out = f" without {', '.join(plan.excluded_nodes)}" if plan.excluded_nodes else ""
        why = (
            decision.reason
            if decision.action is Action.CHECKPOINT_AND_REQUEUE
            else f"{decision.reason}; Slurm sent the job SIGTERM meanwhile (preemption, or --signal "
            "before its time limit): the next attempt waits for the job's next incarnation"
            if self._stops.preemption
            else f"{verdict.category.value if verdict else 'the failure'}: leaving {', '.join(out)} out "
            f"leaves {len(remaining)} of the allocation's {len(self.nodes)} node(s), fewer than "
            f"--slurm-min-nodes {self.cfg.slurm_min_nodes}"
        )
        self.report.reason = (
            f"{why}; requeued as Slurm job {self.slurm.job_id}{left_out}, to go on at attempt {attempt + 1}"
        )
        return True

    def requeue_if_decided(self) -> None:
        """Hand the job back to Slurm where the run was requeued; Slurm then ends this batch
        script, so call it last."""
        if self.slurm is not None and self._requeue is not None:
            log.warning(
                "requeueing Slurm job %s%s",
                self.slurm.job_id,
                f" without {','.join(self._requeue)}" if self._requeue else "",
            )
            slurm.requeue(self.slurm.job_id, self._requeue)

    def _act(self, report: AttemptReport, decision: Decision, verdict: Verdict | None) -> None:
        report.action = None if decision.action is None else decision.action.value
        report.reason = decision.reason
        self._safely(
            f"recording attempt {report.attempt}'s outcome",
            record_attempt,
            self.data_dir,
            self.job_id,
            self.run_id,
            report.attempt,
            status=_STORE_STATUS[report.outcome or Status.FAILED],
            exit_code=report.exit_code,
            reason=decision.reason,
            verdict=verdict,
            action=report.action,
        )
        if report.verdict is not None:
            where = display.culprit_text(report.verdict["culprit"])
            self._incidents.append(
                f"attempt {report.attempt}: {report.verdict['category']}"
                f"{f' ({where})' if where else ''}: {display.action_text(report.action)}"
            )
        if verdict is not None and self.cfg.quarantine:
            entry = self._quarantine(verdict, report.attempt)
            if entry is not None:
                report.quarantine = entry.to_dict()
                self._incidents.append(f"attempt {report.attempt}: quarantined {entry.where}")
                self._drain_in_slurm(entry)
                self._show(
                    report.attempt,
                    f"quarantined {entry.where} for later jobs ({entry.source}); `triage nodes` lists it",
                )

    def _drain_in_slurm(self, entry: HealthEntry) -> None:
        if self.slurm is None:
            return
        if not self.cfg.slurm_drain:
            log.warning(
                "%s is quarantined for this data dir's jobs but stays in service in Slurm "
                "(--slurm-drain is off); `scontrol update nodename=%s state=drain` takes it out",
                entry.node,
                entry.node,
            )
            return
        gpu = "" if entry.gpu is None else f" GPU{entry.gpu}"
        xid = "" if entry.xid is None else f" Xid {entry.xid}"
        reason = f"{entry.category or entry.source}{gpu}{xid} job {self.job_id}"
        if self._safely(f"draining {entry.node} in Slurm", slurm.drain, entry.node, reason):
            log.warning("drained %s in Slurm: %s %s", entry.node, slurm.DRAIN_PREFIX, reason)

    def _safely(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """`fn(...)`, or None where it raised: a store that cannot be read or written costs
        that record (logged, and listed in the report's `store_errors`), never the job."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            error = f"{what}: {type(exc).__name__}: {exc}"[:500]
            if error not in self.report.store_errors:  # once per kind, not every retry
                log.exception("%s failed; the job goes on without it", what)
                self.report.store_errors.append(error)
            return None

    def _quarantine(self, verdict: Verdict, attempt: int) -> HealthEntry | None:
        """The ledger entry the verdict calls for, written; a store that cannot take it costs
        the entry (logged), never the job."""
        try:
            return quarantine_for_verdict(
                self.data_dir,
                verdict,
                job_id=self.job_id,
                run_id=self.run_id,
                attempt=attempt,
                now=time.time(),
                config=self.quarantine,
            )
        except Exception:
            log.exception(
                "attempt %d: could not write the node health ledger; %s is not quarantined",
                attempt,
                verdict.culprit.node,
            )
            return None

    # -- one attempt ------------------------------------------------------------------------
    def _env(self, attempt: int, plan: Plan) -> dict[str, str]:
        env = dict(os.environ)
        if self.cfg.auto_hooks:
            auto_hooks_env(env)
        else:
            env.pop(ENV_AUTO_HOOKS, None)
        env.update(
            {
                ENV_JOB_ID: self.job_id,
                ENV_RUN_ID: self.run_id,
                ENV_ATTEMPT: str(attempt),
                ENV_DATA_DIR: str(self.data_dir),
            }
        )
        env.setdefault(ENV_BUFFER, str(DEFAULT_BUFFER_ENTRIES))  # PyTorch's Flight Recorder
        for key, value in (
            (ENV_EXCLUDE_NODES, ",".join(plan.excluded_nodes)),
            (ENV_RESUME_BEFORE_STEP, "" if plan.resume_before_step is None else str(plan.resume_before_step)),
            (ENV_SKIP_STEPS, ",".join(map(str, plan.skip_steps))),
        ):
            if value:
                env[key] = value
            else:
                env.pop(key, None)
        return env

    def _attempt(
        self, attempt: int, plan: Plan, agents: Agents, previous: AttemptResult | None = None
    ) -> tuple[AttemptResult, AttemptReport, Verdict | None]:
        """One attempt, watched, stopped where it fails, diagnosed; `previous`: the run's attempt
        before it (a restart after a NaN loss that finds no step left has not succeeded)."""
        report = AttemptReport(
            attempt,
            time.time(),
            {
                "excluded_nodes": list(plan.excluded_nodes),
                "resume_before_step": plan.resume_before_step,
                "skip_steps": list(plan.skip_steps),
            },
        )
        self.report.attempts.append(report)
        env = self._env(attempt, plan)
        logs = run_log_dir(self.data_dir, self.job_id, self.run_id)
        scratch = logs / f".torchrun-attempt-{attempt}"
        own_scratch = torchrun_log_env(env, scratch)
        output = AttemptLog(
            logs / f"attempt-{attempt}.log",
            max_bytes=int(self.cfg.log_max_mb * 1024 * 1024),
            echo=self.cfg.echo_output,
        )
        step_name = f"triage-{self.job_id}-a{attempt}"
        command = self.command
        if self.slurm is not None:
            nodes = [n for n in self.nodes if n not in plan.excluded_nodes]
            command = slurm.step_command(self.command, nodes=nodes, name=step_name, endpoint_port=free_port())
        procs = AttemptProcesses(command, env, own_children=agents.pids, capture_output=True)
        launcher = procs.launcher
        output.attach(launcher.stdout, launcher.stderr)
        try:
            outcome, detection, progress = self._watch(procs, attempt, report, agents, step_name)
        except BaseException as exc:
            interrupted_at = time.time()
            report.killed_pids = procs.stop(self.cfg.grace)
            if isinstance(exc, KeyboardInterrupt) and str(exc) in ("", "SIGINT", "scancel"):
                # Ctrl-C: the ranks' SIGTERMs that follow are this supervisor's, no preemption
                # (a SIGTERM to the supervisor stays one: a pod evicted, a node drained). A
                # scancel signalled the whole job at one moment: the ranks' SIGTERMs from then on
                # (the supervisor saw its own a moment after theirs) are the cancel's.
                host = socket.gethostname()
                if str(exc) == "scancel" and self._notice_at is not None:
                    interrupted_at = self._notice_at - _SIGNAL_SKEW_S
                elif self._stops.received_at is not None:
                    # a Ctrl-C at a terminal reached the ranks and torchrun as it reached this
                    # process: their KeyboardInterrupts from then on are the stop's
                    interrupted_at = self._stops.received_at - _SIGNAL_SKEW_S
                self._safely(
                    f"recording attempt {attempt}'s interruption",
                    record_output,
                    self.data_dir,
                    self.job_id,
                    self.run_id,
                    attempt,
                    events=[
                        stop_event_row(
                            self.job_id,
                            self.run_id,
                            attempt,
                            host,
                            interrupted_at,
                            "scancel" if str(exc) == "scancel" else "Ctrl-C",
                        )
                    ],
                    ranks=[],
                    host=host,
                )
            self._cancel_step(step_name)
            _end_capture(output, scratch if own_scratch else None)
            # stopped by a signal (Ctrl-C, SIGTERM, scancel); another exception is the
            # supervisor's own failure, which ends the attempt all the same
            ended = Status.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else Status.FAILED
            report.outcome, report.detection, report.ended = ended, "interrupted", time.time()
            self._safely(
                f"recording attempt {attempt}'s outcome",
                record_attempt,
                self.data_dir,
                self.job_id,
                self.run_id,
                attempt,
                status=ended,
                exit_code=launcher.returncode,
                reason="interrupted",
                verdict=None,
                action=None,
            )
            raise
        report.detected_at = time.time()
        report.ranks_seen_at = max((r.first_seen for r in procs.observed.values()), default=None)
        stall = progress.stall if detection == "collective_stall" else None
        fr_folder = fr_dump_dir(self.data_dir, self.job_id, self.run_id, attempt)
        fr_requested = None
        if outcome == Status.HUNG and launcher.poll() is None:
            self._show(attempt, "hang: asking the live ranks for their Flight Recorder dumps", progress)
            # ranks on other nodes (a Slurm step's) are no processes of ours: the store knows them
            expected = set(procs.ranks()) or self._safely(
                "reading the attempt's ranks",
                read_reporting_ranks,
                self.data_dir,
                self.job_id,
                self.run_id,
                attempt,
            )
            fr_requested = self._safely(
                "asking for Flight Recorder dumps", collect_dumps, fr_folder, expected or set(), _FR_WAIT_S
            )
        # Processes left once the command ended on its own outlived it (a daemon child, a
        # rank its launcher lost): the next attempt must not start beside them.
        if detection == "rank_exit" and not procs.ranks():
            # every rank is gone and the launcher is winding up: its own report of which rank
            # failed how ("Signal 9 (SIGKILL) received by PID ...") is worth a moment
            deadline = time.monotonic() + _SETTLE_S
            while launcher.poll() is None and time.monotonic() < deadline:
                time.sleep(_DRAIN_POLL_S)
        outlived = procs.processes() if launcher.poll() is not None else []
        stopped_at = None
        if launcher.poll() is None or outlived:
            self._show(attempt, f"{detection}: stopping the job", progress)
            output.stopping(detection)
            if detection != "slurm_sigterm":  # Slurm's SIGTERM, passed on, is a preemption
                stopped_at = time.time()
            report.killed_pids = procs.stop(self.cfg.grace, rank_grace_s=self._rank_grace(detection))
            self._cancel_step(step_name)
        report.exit_code = launcher.returncode
        report.ended = time.time()
        survivors = procs.processes()  # none, unless one withstood SIGKILL (stuck in the kernel)
        report.survivors = sorted(f"{p.pid} {p.cmdline[:120]}" for p in survivors)
        report.orphans = sorted({f"{p.pid} {p.cmdline[:120]}" for p in outlived + survivors})
        report.outcome, report.detection = outcome, detection
        _end_capture(output, scratch if own_scratch else None)
        report.log = str(output.path)
        self._show(attempt, "diagnosing", progress)
        self._drain(attempt, agents)
        progress = self._read_progress(attempt) or progress
        self._record_output(
            attempt,
            output,
            procs,
            hooked=bool(progress.hooks),
            fr_folder=fr_folder,
            fr_requested=fr_requested,
            stopped=None if stopped_at is None else (stopped_at, detection),
        )
        report.last_step, report.last_progress = progress.last_step, progress.last_progress
        report.first_step_end = progress.first_step_end
        report.resumed_from_step = None if progress.first_step is None else progress.first_step - 1
        verdict, analysis = None, None
        if outcome == Status.COMPLETED and progress.canary_split_step is not None:
            # the canaries disagreed in the last steps, after the watch last looked: a run that
            # finished on wrong numbers has not succeeded (resumed from before the split)
            analysis = self._analysis("looking for silent data corruption")
            if corruption_verdict(analysis, attempt) is not None:
                outcome, detection = Status.FAILED, "corruption"
                report.outcome, report.detection = outcome, detection
        if outcome == Status.COMPLETED and (
            progress.nonfinite_loss_steps >= NONFINITE_LOSS_STEPS
            or (
                previous is not None
                and previous.category is Category.NUMERICAL_INSTABILITY
                and progress.last_step is None
            )
        ):
            # it ended before the watch looked again on a loss that had stayed NaN, or it
            # resumed after one with no step left to train (its script's checkpoint was saved
            # after the loss went NaN): the model it leaves is no result
            outcome, detection = Status.FAILED, "nonfinite_loss"
            report.outcome, report.detection = outcome, detection
        if outcome != Status.COMPLETED:
            if analysis is None:
                analysis = self._analysis(f"diagnosing attempt {attempt}")
            verdict = root_verdict(analysis, attempt)
            if detection == "corruption":  # stopped for it: the ranks had no error of their own
                verdict = corruption_verdict(analysis, attempt) or verdict
            if (
                verdict is not None
                and verdict.category is Category.PREEMPTION
                and outcome != Status.PREEMPTED
            ):
                verdict = None  # the SIGTERM was ours, sent to stop the failed attempt
            if detection == "slurm_sigterm" and not _fault_before(verdict, self._notice_at):
                said = (
                    "Slurm sent the job SIGTERM (preemption, or --signal before its time limit)"
                    if self._ending is None
                    else self._ending.describe()
                )
                verdict = Verdict(
                    Category.PREEMPTION,
                    1.0,
                    f"{said}; the ranks were asked to checkpoint and stop",
                    first_seen=report.detected_at,
                )
            if stall is not None and (
                verdict is None
                or (verdict.category is Category.COLLECTIVE_TIMEOUT and verdict.culprit.rank is None)
            ):
                late = stall.missing[0]
                verdict = Verdict(
                    Category.COLLECTIVE_TIMEOUT,
                    0.8,
                    stall.summary(report.detected_at),
                    Culprit(late.rank, late.node, late.gpu),
                    first_seen=stall.since,
                )
            if detection == "nonfinite_loss" and (
                verdict is None or verdict.category is not Category.NUMERICAL_INSTABILITY
            ):
                summary = (
                    f"the loss came out NaN/Inf on {progress.nonfinite_loss_steps} steps in a row from "
                    f"step {progress.failed_step} and never recovered"
                    if progress.nonfinite_loss_steps
                    else "the restart after a loss gone NaN had no step left to train: the script "
                    "resumed from a checkpoint saved after it (one from before the bad step is needed)"
                )
                verdict = Verdict(Category.NUMERICAL_INSTABILITY, 0.8, summary, first_seen=report.detected_at)
            if verdict is None and outcome == Status.HUNG:
                verdict = Verdict(
                    Category.COLLECTIVE_TIMEOUT,
                    0.5,
                    f"no step progress for longer than the hang threshold "
                    f"(last step {progress.last_step}) while ranks still ran",
                    first_seen=progress.last_progress,
                )
        report.verdict = None if verdict is None else verdict.to_dict()
        self._diagnosis = analysis
        self._score(attempt, analysis)
        report.diagnosed_at = time.time()
        c = None if verdict is None else verdict.culprit
        return (
            AttemptResult(
                attempt,
                outcome,
                None if verdict is None else verdict.category,
                None if c is None else c.node,
                None if c is None else c.rank,
                progress.last_step,
                _failed_step(progress, detection),
            ),
            report,
            verdict,
        )

    def _record_output(
        self,
        attempt: int,
        output: AttemptLog,
        procs: AttemptProcesses,
        *,
        hooked: bool,
        fr_folder: Path,
        fr_requested: float | None,
        stopped: tuple[float, str] | None,
    ) -> None:
        """The decisive lines of the attempt's output, its ranks' Flight Recorder dumps, where
        its ranks ran where no hook said so, and when this supervisor stopped it and why
        (`stopped`), into the store before the diagnosis reads it."""
        host = socket.gethostname()
        nodes = {r.rank: r.node or host for r in procs.observed.values()}
        events = output.event_rows(self.job_id, self.run_id, attempt, nodes, host)
        if stopped is not None:
            events.append(stop_event_row(self.job_id, self.run_id, attempt, host, *stopped))
        events += self._vanished_rows(attempt, procs, nodes, host, events)
        events += (
            self._safely(
                "reading the Flight Recorder dumps",
                dump_event_rows,
                fr_folder,
                self.job_id,
                self.run_id,
                attempt,
                nodes,
                host,
                requested=fr_requested,
            )
            or []
        )
        self._safely(
            f"recording attempt {attempt}'s output",
            record_output,
            self.data_dir,
            self.job_id,
            self.run_id,
            attempt,
            events=events,
            ranks=[] if hooked else list(procs.observed.values()),
            host=host,
        )

    def _watch(
        self, procs: AttemptProcesses, attempt: int, report: AttemptReport, agents: Agents, step_name: str
    ) -> tuple[str, str, Progress]:
        started = report.started
        with Prober(lambda: self._probe(attempt, agents, started), _PROBE_S) as prober:
            stepped_at = 0.0  # a step the hang rule had not seen yet, found as it ran out
            while True:
                outcome, detection, progress = self._watch_loop(
                    procs, attempt, report, agents, step_name, prober, stepped_at
                )
                fresh = None if detection != "hang" else self._stepped_after_all(attempt, agents, progress)
                if fresh is None:
                    return outcome, detection, progress
                stepped_at = fresh.last_progress or time.time()
                self._show(
                    attempt,
                    f"not hung: step {fresh.last_step} came in as the step limit ran out (give "
                    "--startup-timeout/--hang-timeout more room if this repeats)",
                    fresh,
                )

    def _watch_loop(
        self,
        procs: AttemptProcesses,
        attempt: int,
        report: AttemptReport,
        agents: Agents,
        step_name: str,
        prober: Prober[Progress],
        stepped_at: float,
    ) -> tuple[str, str, Progress]:
        """`_watch`'s loop: the processes every `_POLL_S`, the store's progress as `prober`
        brings it (a probe begun before `stepped_at`'s step was stored may not hold it)."""
        started = report.started
        seen: set[int] = set()
        clean: set[int] = set()  # ranks whose hooks recorded a clean exit
        unjudged = False  # their exits could not be read: judged by the time they are gone
        first_gone: float | None = None
        next_tend = 0.0
        next_score = started + self.cfg.score_interval
        progress = Progress()
        notice_at: float | None = None  # when Slurm's SIGTERM was seen (monotonic)
        forwarded = False
        blind_said = False
        next_corruption_check = 0.0
        steps = StepWatch(self.cfg.prepare_timeout)
        while True:
            self._stops.check()
            if self._stops.preemption and self.slurm is not None:
                # Slurm signals every process of the step, torchrun included, whose exit status
                # then says little: the attempt ends because the scheduler asked. Ranks leave
                # one by one as their saves end (torchrun may cut a save short), which the
                # rank-exit and hang rules would take for a failure and restart: none applies
                # now. The launcher's exit ends the attempt, or Slurm's second SIGTERM (it is
                # ending the job now), or `_PREEMPTED_SAVE_S`.
                if notice_at is None:
                    notice_at, self._notice_at = time.monotonic(), time.time()
                    self._ending = self._safely(
                        "asking Slurm why it sent SIGTERM", slurm.ending, self.slurm.job_id
                    )
                    if self._ending is not None and self._ending.kind == "cancelled":
                        # the user's or an administrator's scancel: stopped as a Ctrl-C is,
                        # never requeued (a job Slurm requeues itself still goes on with the run)
                        self._continue_after(attempt)
                        log.warning("%s: stopping the job, not requeueing it", self._ending.describe())
                        raise Interrupted("scancel")
                    if self._ending is not None and self._ending.kind == "time_limit":
                        # said now: Slurm kills this process KillWait after the limit, maybe
                        # before the report
                        log.warning(
                            "%s: asking the ranks to checkpoint; Slurm requeues no job past its limit, "
                            "so submit it again to go on from that checkpoint (or give it "
                            "--signal=B:TERM@120 --requeue for Triage to requeue it in time)",
                            self._ending.describe(),
                        )
                    self._show(
                        attempt, "SIGTERM from Slurm: asking the ranks to checkpoint and stop", progress
                    )
                    self._continue_after(attempt)
                if not forwarded:
                    forwarded = self._pass_notice_on(procs, step_name, time.monotonic() - notice_at)
                if (
                    procs.poll() is not None
                    or self._stops.notices > 1
                    or time.monotonic() - notice_at >= _PREEMPTED_SAVE_S
                ):
                    return Status.PREEMPTED, "slurm_sigterm", progress
                time.sleep(_POLL_S)
                continue
            rc = procs.poll()
            now = time.time()
            if rc is not None:
                return (
                    {0: Status.COMPLETED, EXIT_PREEMPTED: Status.PREEMPTED}.get(rc, Status.FAILED),
                    "launcher_exit",
                    progress,
                )
            ranks = procs.ranks()
            seen |= set(ranks)
            self._ranks_seen, self._ranks_running = seen, set(ranks)
            gone = seen - set(ranks) - clean
            if first_gone is None and gone:
                first_gone = report.first_exit_at = now
                report.exited_first = sorted(gone)
            judged = None
            if (
                first_gone is not None
                and progress.hooks
                and not unjudged
                and now - first_gone >= _EXIT_CHECK_S
            ):
                # the ranks report their own exits: a failure is a rank gone without a clean one
                judged = self._clean_exits(attempt, agents, procs, gone)
                unjudged = judged is None  # records not confirmed in the store: the timed rule
            if judged is not None:
                clean |= judged
                if gone - clean:
                    report.vanished = sorted(gone - clean)
                    return Status.FAILED, "rank_exit", progress
                first_gone = report.first_exit_at = None
                report.exited_first = []
            elif first_gone is not None and (unjudged or not progress.hooks):
                if ranks and now - first_gone >= RANK_EXIT_GRACE_S:
                    return Status.FAILED, "rank_exit", progress
                if not ranks and now - first_gone >= RANK_EXIT_GRACE_S + self.cfg.grace:
                    return Status.FAILED, "rank_exit", progress  # the launcher does not end
            if now >= next_tend:
                agents.tend()
                next_tend = now + _PROBE_S
            if not blind_said and (where := prober.stuck(_BLIND_AFTER_S)) is not None:
                blind_said = True
                log.warning(
                    "attempt %d: reading the store has not returned for %.0f s; until it does no "
                    "hang can be declared from the step progress. The read is at:\n%s",
                    attempt,
                    _BLIND_AFTER_S,
                    where,
                )
                self._show(attempt, f"the store read has not returned for {_BLIND_AFTER_S:.0f} s", progress)
            probed = prober.take()
            if probed is not None:
                progress = probed
                self._stepped |= progress.last_step is not None
                self._announce(attempt, progress)
                if progress.gpu_fault is not None:  # its rank can do no more work
                    self._show(attempt, f"fatal GPU event: {progress.gpu_fault}", progress)
                    return Status.FAILED, "gpu_fault", progress
                # not while a rank's process is gone and its exit not yet judged: peers wait in a
                # collective for a rank that died (a SIGKILL's heartbeats stay fresh a few
                # seconds), and its exit, not a hang, is what happened
                if progress.stall is not None and not gone:
                    self._show(attempt, f"hang: {progress.stall.summary(now)}", progress)
                    return Status.HUNG, "collective_stall", progress
                if progress.nonfinite_loss_steps >= NONFINITE_LOSS_STEPS:
                    # a script that trains on with a NaN loss: every step from here is wasted
                    self._show(
                        attempt,
                        f"the loss has been NaN/Inf for {progress.nonfinite_loss_steps} steps "
                        f"(since step {progress.failed_step})",
                        progress,
                    )
                    return Status.FAILED, "nonfinite_loss", progress
                if progress.canary_split_step is not None and now >= next_corruption_check:
                    found = corruption_verdict(self._analysis("looking for silent data corruption"), attempt)
                    # a large job's analysis takes seconds: never more than a tenth of the time
                    next_corruption_check = time.time() + max(_CORRUPTION_CHECK_S, 10 * (time.time() - now))
                    if found is not None:
                        self._show(attempt, f"silent data corruption: {found.summary}", progress)
                        return Status.FAILED, "corruption", progress
                self._show(attempt, "running", progress)
                # before the first step, from when the ranks came up: not their imports' time
                last = max(progress.last_progress or max(started, progress.ranks_up or started), stepped_at)
                state = steps.judge(now, last, self._hang_limit(progress), bool(progress.working))
                if state is StepState.WORKING:
                    self._show(
                        attempt,
                        f"no step for {now - last:.0f} s: rank(s) {', '.join(map(str, progress.working))} "
                        "working outside steps (data preparation, evaluation)",
                        progress,
                    )
                elif state is StepState.HUNG:
                    return Status.HUNG, "hang", progress
            if now >= next_score:
                self._score(attempt)
                next_score = time.time() + self.cfg.score_interval
            time.sleep(_POLL_S)

    def _pass_notice_on(self, procs: AttemptProcesses, step_name: str, waited_s: float) -> bool:
        """Whether Slurm's notice reached the attempt's tasks: signalled as a step once squeue
        lists it (just after srun starts it does not yet), else after `_FORWARD_FALLBACK_S`
        through srun itself, which passes SIGTERM on to its tasks."""
        assert self.slurm is not None
        steps = self._safely(
            "passing the SIGTERM on to the attempt's step",
            slurm.cancel_steps,
            self.slurm.job_id,
            step_name,
            "TERM",
        )
        if steps:
            return True
        if waited_s < _FORWARD_FALLBACK_S:
            return False
        if procs.poll() is None:
            procs.notify(signal.SIGTERM)
        return True

    def _continue_after(self, attempt: int) -> None:
        """The run's continuation, saved as soon as the notice comes: Slurm may kill this
        process before the attempt is over (KillWait after the time limit or the preemption's
        GraceTime), and a job Slurm requeues itself must still go on with this run.
        `_requeue_in_slurm` writes it again with the nodes to leave out."""
        assert self.slurm is not None
        continuation = Continuation(
            self.job_id, self.run_id, self._started, attempt + 1, list(self.report.excluded_nodes)
        )
        self._safely("saving the run's continuation", continuation.save, self.data_dir, self.slurm.job_id)

    def _vanished_rows(
        self,
        attempt: int,
        procs: AttemptProcesses,
        nodes: dict[int, str],
        host: str,
        captured: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """A `rank_exit` event for each rank seen gone first with neither an exit nor an
        exception in its own records (`AttemptReport.vanished`) that the launcher's output did
        not report: the attempt is stopped before torchrun prints its failure summary, and a
        rank killed by SIGKILL says nothing itself, so this is the evidence of who died first.
        One the launcher did report is dated no later than when it was seen gone."""
        report = self.report.attempts[-1]
        said = {r["rank"] for r in captured if r["kind"] == EVENT_RANK_EXIT}
        if report.first_exit_at is not None:
            for r in captured:
                if r["kind"] == EVENT_RANK_EXIT and r["rank"] in report.vanished:
                    # the launcher reports a death when it is read, seconds after it: the rank
                    # died by the time it was first seen gone (a stall whose missing rank had
                    # died was otherwise dated before the death and blamed on it)
                    r["time"] = min(r["time"], report.first_exit_at)
        rows = []
        for rank in report.vanished:
            if rank in said or rank not in procs.observed or report.first_exit_at is None:
                continue
            first = rank in report.exited_first
            pid = procs.observed[rank].pid
            rows.append(
                {
                    "job_id": self.job_id,
                    "run_id": self.run_id,
                    "attempt": attempt,
                    "source": EVENT_SOURCE_SUPERVISOR,
                    "rank": rank,
                    "node": nodes.get(rank, host),
                    "time": report.first_exit_at,
                    "kind": EVENT_RANK_EXIT,
                    "message": f"rank {rank} (pid {pid}) ended with no exit or exception of its own "
                    f"recorded{' (seen gone first)' if first else ''}: killed by a signal",
                    "detail": json.dumps(
                        {
                            "exit_code": None,
                            "signal": None,
                            "pid": pid,
                            "first_observed": first,
                            "vanished": True,
                        }
                    ),
                }
            )
        return rows

    def _announce(self, attempt: int, progress: Progress) -> None:
        """Say once which signals the ranks turned out to give: the hang rules that apply
        follow from it."""
        if progress.hooks in self._announced or not progress.hooks:
            return
        self._announced.add(progress.hooks)
        limit = self.cfg.startup_timeout or DEFAULT_STARTUP_TIMEOUT_S
        how = {
            "explicit": "the script's own TrainingMonitor ("
            + (
                f"steps expected: a missing first step counts as hung after --startup-timeout {limit:.0f} s)"
                if progress.last_step is None
                else "a step is stored for every step)"
            ),
            "auto": "auto-instrumentation (steps where the loop steps a torch optimizer; "
            + (
                "no hang is declared before the first step)"
                if self.cfg.startup_timeout is None
                else f"a missing first step counts as hung after --startup-timeout {limit:.0f} s)"
            ),
        }
        # an explicit monitor retires the automatic one in its rank: name only the one reporting
        shown = ("explicit",) if "explicit" in progress.hooks else progress.hooks
        self._show(attempt, "ranks report through " + " and ".join(how.get(h, h) for h in shown), progress)

    def _clean_exits(
        self, attempt: int, agents: Agents, procs: AttemptProcesses, gone: set[int]
    ) -> set[int] | None:
        """Those of `gone` whose hooks recorded a clean exit, once their last records are in
        the store: the agents are asked to ingest now (`_EXIT_FLUSH_WAIT_S` at most). None
        where that cannot be known: an agent that did not confirm (another job's, a slow
        one), the progress probe's ingest still under way, or a store that could not be read."""
        if not self._store_up_to_date(agents):
            return None  # the probe's ingest is stuck: judged by the time they are gone
        since = {r: procs.observed[r].first_seen for r in gone if r in procs.observed}
        return self._safely(
            "reading the ranks' exits",
            read_clean_exits,
            self.data_dir,
            self.job_id,
            self.run_id,
            attempt,
            since,
        )

    def _store_up_to_date(self, agents: Agents) -> bool:
        """Ask the agents to ingest the ranks' spools now and wait for it (`_EXIT_FLUSH_WAIT_S`
        at most, which outlasts the ranks' own flush interval): what the ranks recorded up to
        a moment ago is then in the store. False where that could not be had (an agent that did
        not confirm, the progress probe's ingest still under way)."""
        asked = agents.ask_flush()
        if set(self.agent_nodes) - set(asked):
            return False
        deadline = time.monotonic() + _EXIT_FLUSH_WAIT_S
        while any(agents.flushed_at(node) < when for node, when in asked.items()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_DRAIN_POLL_S)
        return self._ingest(
            "ingesting the spools", agents, wait_s=max(0.0, deadline - time.monotonic()) + _PROBE_S
        )

    def _stepped_after_all(self, attempt: int, agents: Agents, progress: Progress) -> Progress | None:
        """The attempt's progress where a step came in that the hang rule had not seen (the
        ranks' last second of records, still in their buffers when it looked): the first step
        of a start-up just past its limit is no hang. None where none came."""
        time.sleep(_RANK_FLUSH_S)  # what the ranks recorded by now is in their spools then
        if not self._store_up_to_date(agents):
            return None
        fresh = self._read_progress(attempt)
        if fresh is None or fresh.last_step is None:
            return None
        if progress.last_step is not None and fresh.last_step <= progress.last_step:
            return None
        return fresh

    def _rank_grace(self, detection: str) -> float | None:
        """How long the ranks get after SIGTERM. A failed attempt's ranks can finish nothing
        together any more (a peer is dead, hung or on a lost GPU; a checkpoint would block in
        its first collective) or nothing worth keeping (a corruption: wrong numbers): they get
        what their hooks need to write what they buffered, `_SETTLE_S`; their launchers keep the whole `--grace` to report them gone (a run
        summary, torchrun's failure report: cut at 1 s more, a summary was lost). A stop the
        ranks can act on (a preemption, Ctrl-C: the supervisor's interrupt path) gives them the
        whole `--grace`, to save a checkpoint."""
        if detection in (
            "rank_exit",
            "gpu_fault",
            "collective_stall",
            "hang",
            "launcher_exit",
            "corruption",
            "nonfinite_loss",
        ):
            return _SETTLE_S
        return None

    def _probe(self, attempt: int, agents: Agents, since: float) -> Progress | None:
        """The attempt's progress from the store, None where the store could not be read this
        time (a damaged file, a full disk): then no hang is declared on stale progress. A
        failed ingest does not stop the read of what is stored."""
        self._ingest("ingesting the spools while watching", agents)
        return self._read_progress(attempt, since)

    def _read_progress(self, attempt: int, since: float | None = None) -> Progress | None:
        """`read_attempt_progress`, None where the store could not be read (said once)."""
        return self._safely(
            f"reading attempt {attempt}'s progress",
            read_attempt_progress,
            self.data_dir,
            self.job_id,
            self.run_id,
            attempt,
            since=since,
        )

    def _score(self, attempt: int, analysis: JobAnalysis | None = None) -> None:
        """Record the job's goodput and straggler scores for the node agents to export: one
        analysis per job, here, instead of one per node. A failure costs this round only."""
        try:
            if analysis is None:
                analysis = analyze(self.data_dir, self.job_id, self.run_id, self._analyzer_config())
            if analysis is not None:
                record_scores(self.data_dir, analysis, attempt)
        except Exception:
            log.exception(
                "scoring job %s failed; its goodput and straggler scores are not updated this round",
                self.job_id,
            )

    def _hang_limit(self, progress: Progress) -> float | None:
        """Seconds without a step that make a hang; None where the step rule does not apply:
        before the first step of a job that is not known to report steps (no TrainingMonitor
        of its own, no earlier attempt of this run that stepped), which must never be stopped
        for the lack of a signal it does not give."""
        if progress.last_step is None:
            if self.cfg.startup_timeout is not None and progress.hooks:
                # the user's word that steps will come, where hooks can report them
                return self.cfg.startup_timeout
            if "explicit" in progress.hooks or self._stepped:
                return DEFAULT_STARTUP_TIMEOUT_S
            return None
        if self.cfg.hang_timeout is not None:
            return self.cfg.hang_timeout
        a = AnalyzerConfig()
        return max(a.hang_min_s, a.hang_step_factor * (progress.step_p50_s or 0.0))

    def _analysis(self, what: str) -> JobAnalysis | None:
        """The run's analysis as the store has it now, with this supervisor's hang threshold;
        None where it failed (said)."""
        return self._safely(what, analyze, self.data_dir, self.job_id, self.run_id, self._analyzer_config())

    def _analyzer_config(self) -> AnalyzerConfig:
        """Post-mortem analysis, with the hang threshold this supervisor used."""
        if self.cfg.hang_timeout is None:
            return AnalyzerConfig()
        return AnalyzerConfig(hang_min_s=self.cfg.hang_timeout)

    def _drain(self, attempt: int, agents: Agents) -> None:
        """Wait until the attempt's spool segments are in the store (ingest them where no
        agent does), so the verdict sees the ranks' last words, and until the agents have
        stored their GPUs' and kernel logs' state after the failure. Our agents are asked to
        flush at once (SIGUSR1) and say when they did; a node served by another job's agent,
        or with `--agents none` by its own (a service, a Prolog's), ingests on its own
        schedule: waited for too, up to `_DRAIN_S`, then one more agent cycle."""
        asked = agents.ask_flush()
        self._ingest("ingesting the attempt's spools", agents)
        deadline = time.monotonic() + _DRAIN_S
        while time.monotonic() < deadline and (
            self._pending_segments(attempt)
            or any(agents.flushed_at(node) < when for node, when in asked.items() if node in agents.running())
        ):
            time.sleep(_DRAIN_POLL_S)
            self._ingest("ingesting the attempt's spools", agents)
        if set(self.agent_nodes) - set(asked):
            time.sleep(self.cfg.agent_interval)  # one more cycle of the agents not ours

    def _ingest(self, what: str, agents: Agents, wait_s: float | None = None) -> bool:
        """`ingest_pending`, one at a time: the progress probe's thread ingests too. With
        `wait_s`, False when the other ingest does not end within it (nothing done here)."""
        if not self._ingest_lock.acquire(timeout=-1 if wait_s is None else wait_s):
            return False
        try:
            self._safely(what, ingest_pending, self.data_dir, self._live_agents(agents))
        finally:
            self._ingest_lock.release()
        return True

    def _live_agents(self, agents: Agents) -> set[str]:
        return agents.running()

    def _pending_segments(self, attempt: int) -> int:
        count = 0
        for node in spool_nodes(self.data_dir):
            root = spool_node_dir(self.data_dir, node) / job_dir_name(self.job_id, self.run_id) / str(attempt)
            if root.is_dir():
                count += sum(1 for f in root.glob("*/*") if parse_segment_name(f.name))
        return count

    def _job_nodes(self, analysis: JobAnalysis | None) -> list[str]:
        """The nodes the job's ranks ran on, from the attempt's diagnosis where there is one."""
        if analysis is None:
            analysis = self._safely(
                "finding the job's nodes", analyze, self.data_dir, self.job_id, self.run_id
            )
        if analysis is None:
            return []
        return sorted({n for a in analysis.attempts for n in a.nodes})

    def _show(self, attempt: int, state: str, progress: Progress | None = None) -> None:
        self.on_update(
            LiveState(
                attempt,
                state,
                progress or Progress(),
                tuple(self.report.excluded_nodes),
                tuple(self._incidents),
                tuple(sorted(self._ranks_seen)),
                tuple(sorted(self._ranks_running)),
            )
        )


def _failed_step(progress: Progress, detection: str) -> int:
    """The step the failure hit: for a corruption, the step after the last whose canaries all
    agreed (the fault began somewhere after it and up to where they first disagreed; every
    checkpoint from it on may hold wrong numbers), else the attempt's first step; the first
    non-finite loss; else the step after the last one completed."""
    if detection == "corruption" and progress.canary_split_step is not None:
        if progress.canary_clean_step is not None:
            return progress.canary_clean_step + 1
        return progress.first_step if progress.first_step is not None else progress.canary_split_step
    if progress.failed_step is not None:
        return progress.failed_step
    return (progress.last_step or 0) + 1


def _end_capture(output: AttemptLog, scratch: Path | None) -> None:
    """The attempt's output is all read (or its readers given up on), and torchrun's scratch
    tee folder, which only repeats it, is gone: on a normal end and on an interrupt alike."""
    output.close()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


def _fault_before(verdict: Verdict | None, notice_at: float | None) -> bool:
    """Whether the attempt's root cause is a fault of a node's hardware seen before Slurm's
    notice: still its cause (the node is left out of the requeued job), not the preemption."""
    return (
        verdict is not None
        and notice_at is not None
        and verdict.category.spec.action is Action.RESTART_EXCLUDING_NODE
        and verdict.culprit.node is not None
        and verdict.first_seen is not None
        and verdict.first_seen < notice_at
    )


def _why(entries: Sequence[HealthEntry]) -> str:
    return "; ".join(f"{e.where}: {e.reason}" for e in entries)[:300]


def _leave_out(plan: Plan, quarantine: dict[str, Any] | None, nodes: Sequence[str]) -> Plan:
    """`plan` with a node quarantined by the failed attempt left out too (a repeat offender
    whose own failure called for a plain restart), unless it is the last node left."""
    node = None if quarantine is None else quarantine["node"]
    if node is None or node not in nodes or node in plan.excluded_nodes:
        return plan
    if [n for n in nodes if n not in plan.excluded_nodes] == [node]:
        return plan
    return Plan((*plan.excluded_nodes, node), plan.resume_before_step, plan.skip_steps)


#: An attempt's outcome -> the status the store keeps for it (a hang is a failure there).
_STORE_STATUS: dict[str, Status] = {
    Status.FAILED: Status.FAILED,
    Status.HUNG: Status.FAILED,
    Status.PREEMPTED: Status.PREEMPTED,
    Status.COMPLETED: Status.COMPLETED,
}
