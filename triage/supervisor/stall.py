"""A hang found from the collective stall itself, seconds after it starts.

NCCL's watchdog waits 10 minutes and the step-progress timeout many step times; but a hang is
visible long before either: every other rank of a process group sits in the same collective
(group, sequence number), and one rank has not entered it. Each rank's heartbeat (every
second, from a thread, so it goes on while the main thread is stuck) says which collective it is
in and since when; the supervisor reads the newest heartbeat per rank on every probe.

A stall is declared when ranks of a group have waited in one collective (group, seq) longer
than a bound learned from the job's own timings,

    bound = max(STALL_MIN_S, WAIT_FACTOR x p99 of that op's recent waits, STEP_FACTOR x median step)

while every member of the group is alive (a fresh heartbeat) and fewer than half of them are
not in it: those are the culprits. Not a stall: late ranks that are all in a save (a rank
writing to storage keeps its peers waiting, in the save's collectives or the next step's;
`checkpoint_save_begin` or `file_save_begin` without its end; a save on another rank does not
excuse them), a rank that is ahead (in a later collective of the group), a group whose every
member is inside the collective (all entered and none returns: the network or a peer's
device, which the step timeout and the analyzers handle), or ranks half or more of the group
(who is late is then unclear). And not a stall while a missing rank is working: each heartbeat
carries the seconds that rank's main thread ran or waited for a CPU (a rank starved of CPU on a
loaded host wants to work all the same), the CPU seconds of its child processes, and the bytes it
has read; a rank that used more than `BUSY_SHARE` of the stall's wall time running or wanting to run (a long
step, an evaluation only rank 0 runs while the others wait at a barrier, data prepared in a pool
of workers) or read more than `BUSY_READ_BPS` (a dataset streamed from files) is working, not stuck (a deadlock, a
sleep, a wait on something that never comes); a rank whose hooks do not report it is given the
benefit of the doubt. So a
legitimately long step is no hang however long it takes, and the step-progress timeout stays
the backstop for what this rule lets pass (a rank stuck busy-waiting on its GPU).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import duckdb

#: The least wait that can be a stall: far above a healthy collective's wait (milliseconds)
#: and a heartbeat's 1 s period, well below any watchdog.
STALL_MIN_S = 2.0
WAIT_FACTOR = 5.0
STEP_FACTOR = 3.0
#: A heartbeat older than this is from a rank that may be dead: no stall is judged then.
FRESH_S = 5.0
#: A missing rank whose main thread and child processes used more CPU than this share of the
#: stall is working ...
BUSY_SHARE = 0.25
#: ... as is one that read more than this many bytes a second (a dataset streamed from files: a
#: stuck rank reads nothing; socket reads by `recv` are not counted, see `trainer_hooks/activity.py`).
BUSY_READ_BPS = 256 * 1024
#: The recent seconds over which a late rank's work is measured.
WORK_WINDOW_S = 20.0


@dataclass(frozen=True)
class Beat:
    """A rank's newest heartbeat."""

    rank: int
    node: str | None
    gpu: int | None
    time: float
    step: int | None
    group: str | None  # the collective it is in, if any
    seq: int | None
    op: str | None
    since: float | None


@dataclass(frozen=True)
class Stall:
    group: str
    seq: int
    op: str | None
    waiting: tuple[int, ...]
    missing: tuple[Beat, ...]
    since: float
    bound_s: float

    def summary(self, now: float) -> str:
        who = ", ".join(str(b.rank) for b in self.missing)
        return (
            f"ranks {', '.join(map(str, self.waiting))} waited {now - self.since:.1f} s in "
            f"{self.op or 'a collective'} (group {self.group}, seq {self.seq}) that rank(s) {who} "
            f"never entered (bound {self.bound_s:.1f} s from the job's own timings)"
        )


def find_stall(
    beats: list[Beat],
    members: dict[str, set[int]],
    *,
    p99_wait_s: dict[str, float],
    step_p50_s: float | None,
    saving: frozenset[int],
    now: float,
) -> Stall | None:
    """`members`: group -> the ranks seen in it (its collectives); `p99_wait_s`: op -> the
    99th percentile of its recent waits; `saving`: the ranks with a save begun and not ended."""
    by_rank = {b.rank: b for b in beats}
    waiting: dict[tuple[str, int], list[Beat]] = defaultdict(list)
    for b in beats:
        if b.group is not None and b.seq is not None and b.since is not None:
            waiting[(b.group, b.seq)].append(b)
    for (group, seq), inside in sorted(waiting.items(), key=lambda kv: min(b.since or 0.0 for b in kv[1])):
        ranks = members.get(group, set()) | {b.rank for b in inside}
        beats_of = [by_rank.get(r) for r in ranks]
        if any(b is None or now - b.time > FRESH_S for b in beats_of):
            continue  # a member without a fresh heartbeat: maybe dead, not a stall to judge
        op = inside[0].op
        since = min(b.since for b in inside if b.since is not None)
        bound = max(
            STALL_MIN_S,
            WAIT_FACTOR * p99_wait_s.get(op or "", 0.0),
            STEP_FACTOR * (step_p50_s or 0.0),
        )
        if now - since < bound:
            continue
        missing = [
            b
            for b in beats_of
            if b is not None
            and not (b.group == group and b.seq is not None and b.seq >= seq)  # in it, or ahead
        ]
        if not missing or 2 * len(missing) >= len(ranks):
            continue
        if all(b.rank in saving for b in missing):
            continue  # the late ones are writing to storage: their peers wait for a save
        return Stall(
            group,
            seq,
            op,
            tuple(sorted(b.rank for b in inside)),
            tuple(sorted(missing, key=lambda b: b.rank)),
            since,
            bound,
        )
    return None


STALL_SQL = """
WITH hb AS (
    SELECT rank, node, gpu, time, step, inflight_group, inflight_seq, inflight_op, inflight_since,
           row_number() OVER (PARTITION BY rank ORDER BY time DESC) AS n
    FROM heartbeats
    WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt)
SELECT rank, node, gpu, time, step, inflight_group, inflight_seq, inflight_op, inflight_since
FROM hb WHERE n = 1
"""

MEMBERS_SQL = """
SELECT "group", list(DISTINCT rank) FROM collectives
WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
GROUP BY "group"
"""

#: The recent completed waits per op (the newest 2000 collectives of the attempt).
WAITS_SQL = """
SELECT op, quantile_cont(end_time - enter_time, 0.99) FROM (
    SELECT op, enter_time, end_time FROM collectives
    WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
      AND end_time IS NOT NULL
    ORDER BY enter_time DESC LIMIT 2000)
GROUP BY op
"""

#: How much a rank worked since `since`, from its first and newest heartbeats after it: the
#: share of wall time its main thread and its child processes spent on the CPU, and the bytes
#: per second it read; NULL where the hooks do not report them or one beat is all.
WORK_SQL = """
SELECT (arg_max(main_cpu_s, time) - arg_min(main_cpu_s, time)
        + coalesce(greatest(arg_max(children_cpu_s, time) - arg_min(children_cpu_s, time), 0), 0))
         / nullif(max(time) - min(time), 0),
       greatest(arg_max(read_bytes, time) - arg_min(read_bytes, time), 0) / nullif(max(time) - min(time), 0)
FROM heartbeats
WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt AND rank = $rank
  AND time >= $since AND main_cpu_s IS NOT NULL
"""

#: The ranks that made progress of their own while no steps came (the step-progress rule's
#: "working"): outside every collective, working in child processes or reading data since
#: `since` (preparing data in a pool, streaming it from files); or, since `main_since` (the
#: last step, at most `since`), running Python code on the main thread: CPU, and its stack of Python functions
#: found changed at `MAIN_MOVES_PER_S` of the looks at least (an evaluation, a dataset tokenized
#: in place); or found in as many different collectives (an evaluation whose ranks mostly wait
#: on each other's all-gathers, with little CPU and one stack at each look: its collectives
#: still end). A main thread's CPU alone does not count: a rank spinning on a GPU that never
#: answers spends it too, in one call whose stack never changes, in one collective at most.
#: This work is measured since the last step only, so that the steps before a hang do not
#: excuse it.
WORKING_SQL = """
WITH hb AS (
    SELECT rank, time, main_cpu_s, children_cpu_s, read_bytes, main_moves, inflight_group, inflight_seq,
           row_number() OVER (PARTITION BY rank ORDER BY time DESC) AS n
    FROM heartbeats
    WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt AND time >= $since),
prepared AS (
    SELECT rank FROM hb
    GROUP BY rank
    HAVING max(time) > min(time) AND bool_and(n > 1 OR inflight_seq IS NULL) AND (
        greatest(arg_max(children_cpu_s, time) - arg_min(children_cpu_s, time), 0) / (max(time) - min(time)) > $share
        OR greatest(arg_max(read_bytes, time) - arg_min(read_bytes, time), 0) / (max(time) - min(time)) > $bps)),
ran AS (
    SELECT rank FROM hb
    WHERE time >= $main_since
    GROUP BY rank
    HAVING max(time) > min(time) AND (
        ((arg_max(main_cpu_s, time) - arg_min(main_cpu_s, time)) / (max(time) - min(time)) > $share
         AND arg_max(main_moves, time) - arg_min(main_moves, time)
             >= greatest($moves_min, $moves_per_s * (max(time) - min(time))))
        OR count(DISTINCT inflight_group || ':' || inflight_seq)
             >= greatest($moves_min, $moves_per_s * (max(time) - min(time)))))
SELECT rank FROM prepared UNION SELECT rank FROM ran ORDER BY rank
"""

#: A main thread runs Python code when its stack is found changed at this share of the looks
#: (one a second) at least: an evaluation's changes at most looks, a pure-Python tokenizer's at
#: a fifth to a half (the looks land where the interpreter lets another thread in: a tight
#: loop offers few such places), a spin's or a deadlock's at none ...
MAIN_MOVES_PER_S = 0.1
#: ... and at this many looks at least, so that two looks a second apart never suffice.
MAIN_MOVES_MIN = 3


def read_working(
    con: duckdb.DuckDBPyConnection, params: dict[str, object], since: float, main_since: float
) -> tuple[int, ...]:
    """The ranks making progress of their own while no steps come (`WORKING_SQL`)."""
    rows = con.execute(
        WORKING_SQL,
        {
            **params,
            "since": since,
            "main_since": max(since, main_since),
            "share": BUSY_SHARE,
            "bps": BUSY_READ_BPS,
            "moves_min": MAIN_MOVES_MIN,
            "moves_per_s": MAIN_MOVES_PER_S,
        },
    ).fetchall()
    return tuple(int(r) for (r,) in rows)


#: The ranks of this attempt with a save begun and not ended: a checkpoint, or a file the
#: zero-code hooks saw written (`trainer_hooks/saves.py`; each kind on its own: a file written while a
#: checkpoint is still open leaves the checkpoint open). A save that never ends (a write hung
#: in the kernel) excuses its rank for good: the step-progress timeout is the backstop there.
SAVING_SQL = """
SELECT rank FROM (
    SELECT rank,
           max(time) FILTER (WHERE kind = 'checkpoint_save_begin') AS cb,
           max(time) FILTER (WHERE kind IN ('checkpoint_save_end', 'checkpoint_save_failed')) AS ce,
           max(time) FILTER (WHERE kind = 'file_save_begin') AS fb,
           max(time) FILTER (WHERE kind = 'file_save_end') AS fe
    FROM events
    WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
      AND kind IN ('checkpoint_save_begin', 'checkpoint_save_end', 'checkpoint_save_failed',
                   'file_save_begin', 'file_save_end')
    GROUP BY rank)
WHERE (cb > coalesce(ce, 0) OR fb > coalesce(fe, 0)) AND rank IS NOT NULL
"""


def read_stall(
    con: duckdb.DuckDBPyConnection, params: dict[str, object], step_p50_s: float | None, now: float
) -> Stall | None:
    """`find_stall` over the store as a snapshot connection has it."""
    beats = [
        Beat(
            int(r),
            n,
            None if g is None else int(g),
            t,
            None if st is None else int(st),
            grp,
            None if sq is None else int(sq),
            op,
            since,
        )
        for r, n, g, t, st, grp, sq, op, since in con.execute(STALL_SQL, params).fetchall()
    ]
    if len(beats) < 2 or not any(b.since is not None for b in beats):
        return None
    members = {str(g): {int(r) for r in ranks} for g, ranks in con.execute(MEMBERS_SQL, params).fetchall()}
    waits = {str(op): float(w) for op, w in con.execute(WAITS_SQL, params).fetchall() if w is not None}
    saving = frozenset(int(r) for (r,) in con.execute(SAVING_SQL, params).fetchall())
    stall = find_stall(beats, members, p99_wait_s=waits, step_p50_s=step_p50_s, saving=saving, now=now)
    if stall is None:
        return None
    # its recent work only: a rank that prefetched a lot just before it got stuck is stuck now
    since = max(stall.since, now - WORK_WINDOW_S)
    for late in stall.missing:
        work = con.execute(WORK_SQL, {**params, "rank": late.rank, "since": since}).fetchone()
        if work is None or is_working(work[0], work[1]):
            return None  # working, or not known to be idle
    return stall


def is_working(cpu_share: float | None, read_bps: float | None) -> bool:
    """Whether a late rank works, by its CPU share (main thread and children) and read rate;
    a rank whose hooks report no CPU time is given the benefit of the doubt."""
    return cpu_share is None or cpu_share > BUSY_SHARE or (read_bps or 0) > BUSY_READ_BPS
