"""Classify raw log lines (exceptions, stderr, kernel log) into the failure taxonomy.

Two levels, both pure: `classify_line` names what one line says (category, strength, signature,
and the rank/node/GPU printed on it) so that cross-rank analyzers can reuse it; `classify_lines`
(or the streaming `LogClassifier` behind it) reads a whole log and applies the attribution rules
of docs/failure-taxonomy.md: root cause, not symptom; a hardware fault on the GPU or host wins over
the software errors it causes (kernel and application logs share no clock, so "within the
correlation window" is the whole log); otherwise the earliest causal line wins; the watchdog
timeouts and peer resets every other rank prints are consequences, never the cause.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from triage.analyzers.code_paths import is_library_path
from triage.analyzers.log_signatures import (
    APP_SIDE_XIDS,
    CAUSED_BY_XID_RE,
    KEYWORDS_RE,
    SIGNATURES,
    SIGNATURES_BY_KEYWORD,
    XID_RE,
    XID_TABLE,
)
from triage.analyzers.log_trends import (
    DATA_WAIT_STRENGTH,
    SPIKE_STRENGTH,
    DataWait,
    LossTrend,
    P2PMatrices,
    TimedOutWorks,
)
from triage.config import ConfigError
from triage.taxonomy import DEFAULT_CONFIDENCE_THRESHOLD, Category, Layer
from triage.verdict import Culprit, Evidence, Verdict

#: Longest line text kept in evidence; a pathological multi-megabyte line is cut, not stored.
MAX_TEXT = 500
#: Distinct ranks, nodes and GPUs a classifier remembers (a real job has at most tens of
#: thousands of ranks; beyond this they are counted as matches but not remembered).
MAX_DISTINCT = 1 << 17
#: Matches kept per signature: the earliest ones decide, the rest are only counted.
MAX_KEPT_PER_SIGNATURE = 50


@dataclass
class LogClassifierConfig:
    threshold: float = field(
        default=DEFAULT_CONFIDENCE_THRESHOLD,
        metadata={"help": "confidence below which the verdict is `unknown`"},
    )
    max_evidence: int = field(default=10, metadata={"help": "most evidence lines reported per verdict"})
    max_consequences: int = field(
        default=20, metadata={"help": "most consequence lines reported per verdict"}
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"--threshold must lie in [0, 1], got {self.threshold}")
        if self.max_evidence < 1:
            raise ConfigError(f"--max-evidence must be at least 1, got {self.max_evidence}")
        if self.max_consequences < 0:
            raise ConfigError(f"--max-consequences must be >= 0, got {self.max_consequences}")


@dataclass(frozen=True)
class LineMatch:
    """What one log line says. `strength` is the confidence the line gives on its own."""

    category: Category
    strength: float
    signature: str
    description: str
    symptom: bool = False
    rank: int | None = None
    node: str | None = None
    gpu: int | None = None
    pci: str | None = None
    xid: int | None = None


# --- culprit forms ---------------------------------------------------------------------------
#: Leading `[rank3]:` / `[default3]:` (torchrun --tee / PyTorch), mpirun's `[1,3]<stderr>:`
#: (after an ISO timestamp) and pasted `[1234]` line numbers.
_PREFIX_RE = re.compile(
    r"^(?:\S+Z: )?(?:\s*\[(?:(?:rank|default)?\d+|\d+,\d+)\](?:<std(?:out|err)>)?:?)+\s*", re.IGNORECASE
)
# and horovodrun's `[3]<stderr>:`
_RANK_PREFIX_RE = re.compile(
    r"\[(?:rank|default)(\d+)\]:|\[\d+,(\d+)\]<std(?:out|err)>:|\[(\d+)\]<std(?:out|err)>:", re.IGNORECASE
)
_SRUN_TASK_RE = re.compile(r"srun: error: \S+: task (\d+): ")
#: PyTorch's rank prefix past a line's start, after text of another tool's
_RANK_INSIDE_RE = re.compile(r"(?<=\s)\[rank\d+\]:\s+(?=(?:[\w.]+\.)?\w*(?:Error|Exception)\b:)")
_RANK_RES = (
    re.compile(r"\[missing ranks: (\d+)\]"),  # Horovod's stall inspector, one rank missing
    re.compile(r"^\s*(\d+)!?: \[[Hh]orovod"),  # Horovod's "Stalled ranks:" list, one rank a line
    re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]"),  # [Rank 3], [PG 0 (default_pg) Rank 3]
    re.compile(r"\(RANK (\d+)\)"),  # DCP: "(RANK 2)"
    re.compile(r"^\s*rank\s*:\s*(\d+)"),  # torchrun summary "rank : 3 (local"
    re.compile(r"\blocal_rank: (\d+) \(pid"),  # torchrun "failed (...) local_rank: 3"
    re.compile(r"(?<![\w.])Rank (\d+)\b(?! Skipping)"),  # "Rank 3" in prose
    re.compile(r"\brank (\d+): \w*(?:Error|Exception)\b"),  # a collective's gathered failures
    re.compile(r"\bprocess rank (\d+) with PID"),  # mpirun "noticed that process rank 7 with PID"
    re.compile(r"^\s*\[rank: (\d+)\]"),  # Lightning's rank-prefixed log lines
    # torch.multiprocessing.spawn "process 1 terminated with signal SIGKILL": the process index,
    # its local rank, which is the rank on a single node
    re.compile(r"\bprocess (\d+) terminated with (?:signal|exit code)"),
    # DeepSpeed's and Accelerate's launchers name a dead child by its command line: its local
    # rank, which is the rank on a single node.
    re.compile(r"'--local_rank=(\d+)'"),
    # srun naming one task that failed ("task 85: Out Of Memory"): the task id is SLURM_PROCID,
    # the rank a launcher under srun hands on (not a range, "tasks 0-3"); not under a per-node
    # launcher (`srun torchrun`: a task is a node), which `LogClassifier` sees and undoes
    _SRUN_TASK_RE,
)
_NODE_RES = (
    re.compile(r"^\s*host\s*:\s*(\S+)"),  # torchrun summary
    re.compile(r"^(?:\w{3}\s+\d+\s+[\d:]{8}|\d{4}-\d\d-\d\dT\S+)\s+(\S+)\s+kernel:"),  # syslog
    re.compile(r"\bJOB \d+ ON (\S+) CANCELLED"),  # slurmstepd
    re.compile(r"\bSTEP [\d.]+ ON (\S+) CANCELLED"),
    re.compile(r"srun: error: (\S+): tasks? [\d-]+"),
    re.compile(r"Node failure on (\S+)"),
)
#: NCCL's `host:pid:tid [cudaDev] NCCL WARN ...`
_NCCL_RE = re.compile(r"^(?:\S+ )?([A-Za-z][\w.-]*):\d+:\d+ \[(\d+)\]")
_GPU_RES = (re.compile(r"\bcuda:(\d+)"), re.compile(r"\bGPU ?(\d+)\b(?![:.]\d)"))
_PCI_RE = re.compile(r"\b((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.\d)\b", re.IGNORECASE)


def rank_prefix(text: str) -> int | None:
    """The rank a line's launcher prefix names (`[rank3]:`, mpirun's `[1,3]<stderr>:`): who
    printed it, as opposed to a rank the line talks about."""
    # `[default0]:[rank12]:` (torchrun --tee over the ranks' own prefix): the local rank comes
    # first, the global rank after it, and the global one is the rank
    found = [int(m.group(1) or m.group(2) or m.group(3)) for m in _RANK_PREFIX_RE.finditer(text[:64])]
    if not found:
        return None
    return found[1] if len(found) > 1 and text.lstrip().lower().startswith("[default") else found[0]


def _first_int(patterns: Iterable[re.Pattern[str]], text: str) -> int | None:
    for p in patterns:
        m = p.search(text)
        if m:
            return int(m.group(1))
    return None


def _culprit_fields(
    raw: str, body: str, reporter_is_culprit: bool = True
) -> tuple[int | None, str | None, int | None, str | None]:
    """Where a line's rank, node, GPU and PCI address are; the rank of its launcher prefix
    only where the rank that printed the line is the one it is about."""
    rank = rank_prefix(raw) if reporter_is_culprit else None
    if rank is None:
        rank = _first_int(_RANK_RES, body)
    if rank is None and "ready ranks:" in body:
        rank = _missing_ready_rank(body)
    node = gpu = None
    nccl = _NCCL_RE.match(body)
    if nccl:
        node, gpu = nccl.group(1), int(nccl.group(2))
    if node is None:
        for p in _NODE_RES:
            nm = p.search(body)
            if nm:
                node = nm.group(1).rstrip(":,")
                break
    if gpu is None:
        gpu = _first_int(_GPU_RES, body)
    pm = _PCI_RE.search(body)
    return rank, node, gpu, (pm.group(1).lower() if pm else None)


#: Horovod's older stall warning lists the ranks that are ready, not the one missing
_READY_RANKS_RE = re.compile(r"\[ready ranks: ([\d, ]+)\]")


def _missing_ready_rank(body: str) -> int | None:
    """The one rank of 0..N absent from Horovod's `[ready ranks: ...]` list, where exactly one
    is (counted, not listed: a log's `[ready ranks: 900000000]` costs nothing)."""
    m = _READY_RANKS_RE.search(body)
    if m is None:
        return None
    ready = {int(r) for r in m.group(1).replace(" ", "").split(",") if r}
    top = max(ready, default=0)
    if len(ready) != top:
        return None
    missing = top * (top + 1) // 2 - sum(ready)
    return missing if 0 <= missing < top and missing not in ready else None


def _cause_xid(body: str, code: int) -> int:
    """The Xid a line stands for: the driver tags the cleanup Xid (45) it raises after a fault
    with `caused by previous Xid N`, and N is the cause (taxonomy: root cause, not symptom)."""
    if "caused by" in body and (m := CAUSED_BY_XID_RE.search(body)):
        return int(m.group(1))
    return code


#: Table order breaks ties in strength: the more specific rows come first.
_ORDER = {sig: i for i, sig in enumerate(SIGNATURES)}


#: A launcher's label in front of every line of one host or task: pdsh's `node2: ` (DeepSpeed's
#: multi-node runner), srun --label's `15: `. Told from a log level or an exception name
#: (`ERROR: `, `KeyError: `) by a digit in it, from a module path (`cv2.error: `) by having no
#: dot unless it is a host's full name with a hyphen in it. The label's host is not taken as the line's node: the host that prints a symptom (a
#: timeout, a reset) is the victim, and a word with a digit is not always a host.
_HOST_LABEL_RE = re.compile(
    r"^\s*(?:(?:[A-Za-z][\w-]*\d[\w-]*"  # node2, gpu-node-01
    r"|(?=[^:\s]*-)[a-z][a-z0-9-]*\d[a-z0-9-]*(?:\.[a-z0-9-]+)+"  # gpu-node-01.cluster.internal
    r"|\d{1,3}(?:\.\d{1,3}){3}|\d+): "  # an IP address, srun's task number
    r"|[A-Za-z][\w.-]*/\d+ \[\d+\]: ?)"  # TorchX's role/replica [rank]: `trainer/0 [3]:`
)


#: A terminal colour or cursor sequence (gcc's and rich's coloured output, kept in a log file).
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def classify_line(text: str) -> LineMatch | None:
    """The strongest signature on one line, with the rank/node/GPU the line itself prints. A line
    that matches nothing is read again without a launcher's host or task label in front."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    found = set(KEYWORDS_RE.findall(text.lower()))
    if not found or " NCCL INFO " in text:
        return None  # NCCL INFO lines report normal set-up, even "cannot open shared object"
    match = _classify_body(text, found)
    if match is None and (label := _HOST_LABEL_RE.match(text)):
        match = _classify_body(text[label.end() :], found)
    if (
        match is None
        and "[rank" in text
        and not _RANK_PREFIX_RE.match(text)
        and (inner := _RANK_INSIDE_RE.search(text))
    ):
        # a runner's own decoration before PyTorch's rank prefix (`llm.0 [stderr] [rank0]: ...`,
        # a summary's `* 1 x [rank0]: ...`): the rank's exception is what follows. Only an
        # exception's own line: cut there, any other line would lose the words before it that
        # say it is a retry or a hint
        match = _classify_body(text[inner.start() :], found)
    return match


def _classify_body(text: str, found: set[str]) -> LineMatch | None:
    body = _PREFIX_RE.sub("", text, count=1)
    candidates = {sig for k in found for sig in SIGNATURES_BY_KEYWORD[k]}
    best: tuple[float, str, Category, str, bool, int | None, str | None] | None = None
    for sig in sorted(candidates, key=_ORDER.__getitem__):
        if sig.regex.search(body) and (best is None or sig.strength > best[0]):
            best = (sig.strength, sig.id, sig.category, sig.description, sig.symptom, None, None)
    xid_pci = None
    if "xid" in found and (xm := XID_RE.search(body)):
        code = _cause_xid(body, int(xm.group("code")))
        if code in XID_TABLE:
            category, strength, meaning = XID_TABLE[code]
            xid_pci = xm.group("pci")
            if category is not None and (best is None or strength >= best[0]):
                best = (strength, f"xid-{code}", category, f"Xid {code}: {meaning}", False, code, xid_pci)
    if best is None:
        return None
    strength, sig_id, category, description, symptom, xid, _ = best
    # a late rank's name, not the waiting reporter's; a desync's reporter is only one party of it
    rank, node, gpu, pci = _culprit_fields(
        text, body, reporter_is_culprit=sig_id not in _NAME_THE_LATE_RANK and sig_id != "collective-mismatch"
    )
    return LineMatch(
        category,
        strength,
        sig_id,
        description,
        symptom,
        rank,
        node,
        gpu,
        (xid_pci.lower() if xid_pci else pci),
        xid,
    )


@dataclass(frozen=True)
class _Hit:
    line: int
    text: str
    match: LineMatch


_HARDWARE_LAYERS = (Layer.GPU, Layer.HOST)
_OWN_ERROR_LAYERS = (Layer.APPLICATION, Layer.FRAMEWORK)
_TRACEBACK_START = "Traceback (most recent call last)"
#: What keeps ranks' interleaved tracebacks apart: a launcher's host or task label and
#: torchrun's rank prefix (`node2: [rank3]: `), each where present.
_LINE_PREFIX_RE = re.compile(r"^((?:\s*(?:[A-Za-z][\w.-]*\d[\w.-]*|\d+): )?(?:\[\w+\]: ?)?)")
#: A traceback's frame line; one a thread cut after its line number (`line 3986,`) is still one
_FRAME_RE = re.compile(r'^\s*File "(.*)", line \d+(?:, in (<?\w+>?)|,)?\s*$')


@dataclass(frozen=True)
class _FrameContext:
    """An exception whose traceback passes through one of these functions failed in that phase:
    its closing line, when it says no more than `signatures` do (an unspecific Python error, a
    peer reset), is then a failure of `category`. A specific line keeps its own category (a
    device-side assert at a save's first synchronisation is still the training's bug)."""

    function: re.Pattern[str]
    category: Category
    signatures: frozenset[str]
    phase: str
    #: a frame in a file whose path this finds is in the phase too, whatever its function
    path: re.Pattern[str] | None = None
    #: where given, the closing line must also name one of these exceptions
    closing: re.Pattern[str] | None = None

    def holds(self, path: str, function: str) -> bool:
        return bool(self.function.fullmatch(function) or (self.path and self.path.search(path)))

    def reads(self, signature: str, text: str) -> bool:
        return signature in self.signatures and (self.closing is None or bool(self.closing.search(text)))


_UNSPECIFIC = frozenset({"python-exception", "generic-runtime-error"})
_FRAME_CONTEXTS = (
    # Megatron's load_checkpoint, DeepSpeed's save_checkpoint and _save_zero_checkpoint,
    # Lightning's _load_from_checkpoint, NeMo's save_checkpoint_to_dir
    _FrameContext(
        re.compile(r"\w*(?:save|load)\w*checkpoint\w*|\w*checkpoint\w*_(?:save|load)\w*", re.IGNORECASE),
        Category.CHECKPOINT_ERROR,
        _UNSPECIFIC,
        "a checkpoint save or load",
    ),
    # inside the distributed checkpoint libraries' own files (Megatron's dist_checkpointing,
    # torch.distributed.checkpoint): a Python exception there (a key the checkpoint lacks); not
    # a peer's aborted communicator, which a save's collectives meet when a rank dies
    _FrameContext(
        re.compile(r"(?!)"),
        Category.CHECKPOINT_ERROR,
        frozenset({"python-exception"}),
        "a checkpoint save or load",
        path=re.compile(r"[/\\](?:dist_checkpointing|distributed[/\\]checkpoint)[/\\]"),
    ),
    # DeepSpeed's checkpoint reading and conversion (ds_to_universal) raise bare RuntimeErrors on
    # a checkpoint they cannot take apart (a shard shorter than its padding); not on a host out
    # of memory or on mismatched collectives
    _FrameContext(
        re.compile(r"(?!)"),
        Category.CHECKPOINT_ERROR,
        _UNSPECIFIC,
        "a checkpoint save or load",
        path=re.compile(r"[/\\]deepspeed[/\\]checkpoint[/\\]"),
        closing=re.compile(r"^(?!.*(?:not enough memory|Allocator|mismatch between collectives))"),
    ),
    # building the datasets (Megatron's, NeMo's, GPT-NeoX's build_train_valid_test_datasets):
    # a file there that cannot be read (an index or data file not found, empty, corrupt) is the
    # input pipeline's; a KeyError or TypeError there is a config bug, the user's
    _FrameContext(
        re.compile(r"_?build\w*datasets?\w*", re.IGNORECASE),
        Category.DATA_PIPELINE_ERROR,
        frozenset({"python-exception"}),
        "building the datasets",
        closing=re.compile(
            r"\b(?:FileNotFound|IsADirectory|NotADirectory|Permission|EOF|IO|OS)Error\b"
            r"|\b(?:Assertion|Value)Error\b.*\b(?:missing|empty|corrupt|not found|cannot (?:mmap|open|read))\b",
            re.IGNORECASE,
        ),
    ),
    # inside the streaming dataset libraries' own files (MosaicML Streaming, LitData): a Python
    # exception there (shared memory a killed run left behind, a shard index it cannot read) is
    # the input pipeline's, whatever the code around it
    _FrameContext(
        re.compile(r"(?!)"),
        Category.DATA_PIPELINE_ERROR,
        frozenset({"python-exception"}),
        "the streaming dataset",
        path=re.compile(r"[/\\](?:streaming[/\\]base|litdata[/\\]streaming)[/\\]"),
    ),
    # a package install (pip's own frames) failing on a corrupt or truncated wheel: the
    # software stack, not the job's data
    _FrameContext(
        re.compile(r"(?!)"),
        Category.ENVIRONMENT_ERROR,
        frozenset({"data-file-short"}),
        "a package install",
        path=re.compile(r"[/\\]pip[/\\]_(?:internal|vendor)[/\\]"),
    ),
    # the process group's set-up: its store barrier, the rendezvous handlers
    _FrameContext(
        re.compile(r"_store_based_barrier|\w*rendezvous\w*|_create_c10d_store"),
        Category.RENDEZVOUS_ERROR,
        _UNSPECIFIC | {"peer-reset"},
        "the process group's rendezvous",
    ),
)


@dataclass(frozen=True)
class TracebackEnd:
    """What a traceback's closing line closes: the phase its frames were in (the deepest frame
    a context holds, with its function) and whether its innermost frame is the job's own code."""

    function: str = ""
    context: _FrameContext | None = None
    own_code: bool = False
    #: the innermost frame's code line is a `raise`: the code chose to fail there
    raised: bool = False
    #: the innermost frame's lines as printed (its `File ...` line, then its `raise` line)
    frame: tuple[str, ...] = ()


#: Words in a RuntimeError that say the operator failed for the GPU, the driver, a peer or the
#: host rather than for what the code gave it: not the code's bug, whatever line called it.
_NOT_THE_CODES_RE = re.compile(
    r"cuda|cudnn|cublas|nccl|nvml|driver|communicator|process ?group|store|socket|mmap|shared memory"
    r"|numpy is not available|internal assert|unknown exception|gloo|connection|timed? ?out",
    re.IGNORECASE,
)
#: A Python exception's closing line: `RuntimeError: ...`, `mypkg.ConfigError: ...`, a bare
#: `Exception`; not a log level (`ERROR: ...`), which is no exception name
_EXCEPTION_LINE_RE = re.compile(r"^(?:[\w.]+\.)?(?:[A-Z]\w*?)?(?:Error|Exception)\b(?::\s*\S|\s*$)")


def own_code_exception(end: TracebackEnd | None, text: str, match: LineMatch | None) -> bool:
    """Whether `text` closes a traceback the job's own code raised (its innermost frame the
    script's, its code line a `raise`), in words no family names: the code's own failure. A
    plain RuntimeError from an operator the code's own line called counts too: the operator
    refused what it was given (`cannot sample n_sample <= 0 samples`); a CUDA, NCCL or other
    named fault has its own family and is not read here."""
    return (
        end is not None
        and end.own_code
        and (
            end.raised
            or (
                match is not None
                and match.signature == "generic-runtime-error"
                and not _NOT_THE_CODES_RE.search(text)
            )
        )
        and end.context is None
        and (match is None or match.signature in _UNSPECIFIC)
        and bool(_EXCEPTION_LINE_RE.match(_PREFIX_RE.sub("", text, count=1)))
    )


class TracebackReader:
    """The phase each rank's traceback being read is in, so its closing line can be read in it.

    Kept per line prefix (`[rank3]:`, `[default3]:`, none), since ranks' tracebacks interleave in
    one log; a traceback ends at its first line that is neither a frame nor indented code, and
    the context goes with it whatever that line says."""

    def __init__(self) -> None:
        self._open: dict[str, TracebackEnd] = {}

    def read(self, text: str) -> TracebackEnd | None:
        """Note one line; what the traceback it closes was, if it closes one."""
        m = _LINE_PREFIX_RE.match(text)
        prefix = (m.group(1) or "") if m else ""
        body = text[m.end() :] if m else text
        if _TRACEBACK_START in body:
            if prefix in self._open or len(self._open) < MAX_DISTINCT:
                self._open[prefix] = TracebackEnd()
            return None
        if "File " in body and (f := _FRAME_RE.match(body)):
            # a frame opens a traceback too: a log cut by a thread often starts inside one
            if prefix in self._open or len(self._open) < MAX_DISTINCT:
                path, function = f.group(1), f.group(2) or ""
                context = next((c for c in _FRAME_CONTEXTS if c.holds(path, function)), None)
                held = self._open.get(prefix, TracebackEnd())
                self._open[prefix] = TracebackEnd(
                    function if context is not None else held.function,
                    context if context is not None else held.context,
                    own_code=not is_library_path(path),
                    frame=(text[:MAX_TEXT],),
                )  # `raised` is the next code line's to say
            return None
        if prefix not in self._open:
            return None
        if body[:1].isspace():
            held = self._open[prefix]
            if held.own_code and not held.raised and body.lstrip().startswith("raise "):
                self._open[prefix] = dataclasses.replace(
                    held, raised=True, frame=(*held.frame, text[:MAX_TEXT])
                )
            return None  # the frame's code line, or its ^^^^ markers
        return self._open.pop(prefix)


#: Signals a process dies of when its own native code fails (torchrun reports them negated):
#: not SIGKILL (the OOM killer's, or an operator's) nor SIGTERM (a stop from outside).
_CRASH_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}
#: A rank's words for a peer that went away (gloo's "Connection closed by peer ... typically
#: caused by a remote worker crashing", NCCL's "remote process exited"), not for a network fault.
_PEER_LOST = frozenset({"peer-reset", "nccl-remote-error"})
#: Lines printed by a rank about a peer that stopped answering (the peer's address in them, not
#: its rank): the printing rank is no culprit.
_LOST_A_PEER = frozenset({"paddle-socket-timeout"})
#: An exception that announces the error it wraps, printed after it (TorchScript's interpreter
#: over a CUDA out of memory): no error of its own.
_WRAPS_A_LATER_ERROR = "The following operation failed in the TorchScript interpreter"
#: The least strength of another rank's own error that explains why its peers lost it, and the
#: categories of such an error (memory running out ends the process that met it).
_PEER_ERROR_STRENGTH = 0.5
_ENDS_A_PROCESS = frozenset({Category.GPU_OOM, Category.HOST_OOM})
#: torchrun's lines on a rank it lost to SIGKILL.
_KILLED = frozenset({"torchrun-sigkill", "torchrun-exitcode-9"})
#: Timeout signatures whose rank is the one that never came, not the one that waited:
#: Horovod's `[missing ranks: N]` and its `Stalled ranks:` list.
_NAME_THE_LATE_RANK = frozenset({"horovod-stall", "horovod-stall-shutdown"})
_ROOT_CAUSE_RE = re.compile(r"Root Cause \(first observed failure\)")
#: torch.multiprocessing.spawn's report of the first child it saw end: "process 1 terminated
#: with signal SIGABRT" / "... with exit code 3" (its process index: the rank on one node)
_SPAWN_FAILED_RE = re.compile(
    r"ProcessExitedException: process (\d+) terminated with (?:signal (SIG\w+)|exit code (\d+))"
)
#: Lines before a hit that its context must (or must not) be found in (`LogClassifier._in_context`).
_CONTEXT_LINES = 8
_SIGNALS = {"SIGILL": 4, "SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8, "SIGKILL": 9, "SIGSEGV": 11, "SIGTERM": 15}
#: torchrun's agent on the first child it saw fail: "failed (exitcode: -11) local_rank: 1 (pid:"
_LAUNCHER_FAILED_RE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid")
#: DeepSpeed's launcher names a dead child by its command line, `[ERROR] ... sigkill_handler]
#: ['python', '-u', 'train.py', '--local_rank=1', ...] exits with return code = -9`; a long
#: command wraps, and its `exits with` line may come a few lines after the rank.
_DS_COMMAND_RE = re.compile(r"sigkill_handler\] \[.*?'--local_rank=(\d+)'")
_DS_WRAP_LINES = 8
#: Launcher lines that say the job was stopped from outside
_OUTSIDE_STOPS = frozenset({"torchrun-sigterm", "torchrun-sighup", "slurm-cancelled"})
#: NCCL's line before the failure its `unhandled system error` stands for, and how many lines
#: back from it the system errors it explains may stand
_LAST_ERROR = "Last error:"
_LAST_ERROR_SPAN = 20
#: A progress bar's percentage (tqdm's `desc:  30%|`), and what its description must say for the
#: bar to be data preparation: the HF datasets tokenizing or mapping a corpus, a test set being
#: prepared, texts grouped or packed; not a checkpoint or a model being loaded or converted.
_BAR_RE = re.compile(r"(\d{1,3})%\s?\|")
_DATA_PREP_RE = re.compile(
    r"(?i:running tokenizer|tokeniz|preprocess|prepar|grouping texts|packing|converting format"
    r"|generating \w+ split)|\bMap\b|\bFilter\b"
)
_NOT_DATA_RE = re.compile(r"checkpoint|model|weight|shard", re.IGNORECASE)
#: Longest bar description read
_BAR_DESC = 120


class LogClassifier:
    """Streaming form of `classify_lines`: feed lines one by one, then ask for the verdict.

    Memory is bounded whatever the log size: per signature only the earliest matches are kept
    (the rest are counted), plus the set of ranks seen.
    """

    def __init__(self, source: str = "log", config: LogClassifierConfig | None = None) -> None:
        self.source = source
        self.config = config or LogClassifierConfig()
        self.lines = 0
        self._hits: list[_Hit] = []
        self._kept: Counter[str] = Counter()
        self._counts: Counter[str] = Counter()
        self._ranks_seen: set[int] = set()
        self._nodes_seen: set[str] = set()
        self._app_xids_per_gpu: Counter[str] = Counter()
        self._in_root_cause = False
        self._root_cause_rank: int | None = None
        self._root_cause_host: str | None = None
        self._root_cause_exit: int | None = None
        self._failure_text: tuple[int, str] | None = None  # (line, text) where the launcher named it
        self._launcher_failed: tuple[int, int] | None = None  # (local rank, exit code)
        self._ds_command: tuple[int, int] | None = None  # (line, local rank) of DeepSpeed's report
        self._tracebacks = TracebackReader()
        # the newest data-preparation progress short of 100%, and what it was when the first
        # collective timed out: peers that waited past the timeout for a rank still tokenizing
        self._preparing: _Hit | None = None
        self._preparing_at_timeout: _Hit | None = None
        # a C++ exception was thrown before an abort (c10d ending the process for an error)
        self._threw_before_abort = False
        # a launcher per node (torchrun, DeepSpeed's): srun's task N is then a node, not rank N
        self._per_node_launcher = False
        self._timed_out = False
        self._traceback_ranks: set[int] = set()  # prefixes on traceback lines (two are enough)
        self._loss = LossTrend(max_series=MAX_DISTINCT)
        self._last_error_at = -1  # the line number of NCCL's latest `Last error:`
        self._p2p = P2PMatrices()
        self._data_wait = DataWait()
        self._triage_stopped = False  # `triage run` wrote that it stopped the attempt
        self._barrier_waits = False  # a store barrier's wait is among the hits
        self._timed_out_works = TimedOutWorks()
        self._cuda_message_at = -_CONTEXT_LINES - 1  # the line of the latest CUDA error message
        self._dcp_frame_at = -_CONTEXT_LINES - 1  # and of a distributed-checkpoint frame
        self._exit_cleanup_at = -_CONTEXT_LINES - 1  # and of multiprocessing's clean-up at exit

    def feed(self, text: str) -> LineMatch | None:
        self.lines += 1
        text = text.rstrip("\r\n")
        if "terminate called after throwing" in text or "taking the entire process down" in text:
            self._threw_before_abort = True
        if (
            "distributed.elastic" in text
            or "distributed/elastic" in text
            or "local_rank" in text
            or ("sigkill_handler" in text)
        ):
            self._per_node_launcher = True  # torchrun, DeepSpeed's or Accelerate's launcher
        if "\x1b" in text:  # a compiler's or a logger's colours: the words are what is read
            text = _ANSI_RE.sub("", text)
        self._note_context(text)
        closed = self._tracebacks.read(text)
        if "%|" in text or "% |" in text:  # a progress bar's
            self._note_progress(text)
        if "\r" in text and classify_line(shown := text[text.rfind("\r") + 1 :]) is not None:
            # a progress bar's updates, then the error after its last carriage return: the
            # line a terminal shows, whose words are the evidence (with the rank prefix the
            # line began with, where the error has none of its own)
            prefix = _RANK_PREFIX_RE.match(text)
            text = shown if prefix is None or _RANK_PREFIX_RE.match(shown) else prefix.group(0) + shown
        match = classify_line(text)
        if "CUDA error" in text or "what():" in text:
            self._cuda_message_at = self.lines
        if "distributed/checkpoint/" in text:
            self._dcp_frame_at = self.lines
        if "sem_unlink(" in text or "multiprocessing/resource_tracker.py" in text:
            self._exit_cleanup_at = self.lines
        elif "FileNotFoundError" not in text and "KeyError" not in text and not text.startswith("    "):
            self._exit_cleanup_at = -_CONTEXT_LINES - 1  # its own error, or another's line
        if match is not None and not self._in_context(match.signature):
            match = None
        if "oss" in text and (loss := self._loss.read(text, rank := rank_prefix(text))):
            self._preparing = None  # training is under way: the data was prepared
            # and a timeout before it was survived: not the one a preparation would explain
            self._timed_out = False
            self._preparing_at_timeout = None
            if match is None and loss.spike:
                match = LineMatch(
                    Category.NUMERICAL_INSTABILITY,
                    SPIKE_STRENGTH,
                    "loss-spike",
                    loss.spike,
                    symptom=True,
                    rank=rank,
                )
        if (waiting := self._data_wait.read(text)) is not None:
            kind, description = waiting
            if kind == "recovered":
                # the wait was the workers' start-up, averaged into the first report
                self._drop_hits("data-wait-dominates")
            elif match is None:
                match = LineMatch(
                    Category.DATA_PIPELINE_ERROR,
                    DATA_WAIT_STRENGTH,
                    "data-wait-dominates",
                    description,
                    symptom=True,
                    rank=rank_prefix(text),
                )
        if (desync := self._timed_out_works.read(text, rank_prefix(text))) is not None:
            # as sure as the launcher's own collective-mismatch check, and a cause: no reporter
            # is the culprit (each rank is one party of it)
            match = LineMatch(Category.USER_CODE_ERROR, 0.85, "collective-mismatch", desync)
        if match is None and (broken := self._p2p.read(text)):
            # a measurement, not a message: as sure as a fatal AER line that the path is bad
            gpu, description = broken
            match = LineMatch(Category.PCIE_ERROR, 0.7, "p2p-test-broken-link", description, gpu=gpu)
        if self._barrier_waits and (
            "Completed store-based barrier" in text
            or (match is not None and match.signature != "store-barrier-waiting")
            or self._launcher_failed is not None
        ):
            # the barrier completed, or something else went wrong: the wait was start-up
            self._drop_hits("store-barrier-waiting")
            self._barrier_waits = False
        if match is not None and match.signature == "store-barrier-waiting":
            self._barrier_waits = True
        if text.startswith("[triage] stopping the attempt"):
            self._triage_stopped = True
        if (
            match is not None
            and match.signature in _OUTSIDE_STOPS
            and (
                self._triage_stopped
                or any(
                    h.match.category is not Category.PREEMPTION and h.match.strength >= 0.6
                    for h in self._hits
                )
            )
        ):
            # a launcher told to stop after the job already failed (Slurm or the peer node's
            # agent ending a step whose rank died) is stopped because of that failure; after
            # `triage run`'s own line in an attempt's log, the SIGTERM is its own (the rank's
            # traceback it stopped the attempt for may come later in the file)
            match = dataclasses.replace(match, symptom=True)
        if text.rstrip().endswith(_LAST_ERROR):
            self._last_error_at = self.lines
        if own_code_exception(closed, text, match) and _WRAPS_A_LATER_ERROR not in text:
            # an exception the job's own code raised, in words no family knows: the code's bug
            match = LineMatch(
                Category.USER_CODE_ERROR,
                0.7,
                "own-code-exception",
                "an exception raised in the job's own code",
                rank=rank_prefix(text),
            )
        if match is None:
            return None
        if self._last_error_at == self.lines - 1 and not match.symptom:
            self._explain_system_errors()
        if (
            match.rank is None
            and match.signature == "launcher-child-sigkill"
            and self._ds_command
            and self.lines - self._ds_command[0] <= _DS_WRAP_LINES
        ):
            match = dataclasses.replace(match, rank=self._ds_command[1])
        if closed is not None and closed.context is not None and closed.context.reads(match.signature, text):
            function, context = closed.function, closed.context
            match = dataclasses.replace(
                match,
                category=context.category,
                strength=max(match.strength, 0.75),
                signature=f"frame-{context.category.value}",
                description=f"an error raised inside `{function}` ({context.phase})",
                symptom=False,
            )
        self._counts[match.signature] += 1
        if match.node:
            _add_bounded(self._nodes_seen, match.node)
        if match.rank is not None:
            _add_bounded(self._ranks_seen, match.rank)
        if (
            match.xid in APP_SIDE_XIDS
            and match.pci
            and (match.pci in self._app_xids_per_gpu or len(self._app_xids_per_gpu) < MAX_DISTINCT)
        ):
            self._app_xids_per_gpu[match.pci] += 1
        if self._kept[match.signature] < MAX_KEPT_PER_SIGNATURE:
            self._kept[match.signature] += 1
            self._hits.append(_Hit(self.lines, text[:MAX_TEXT], match))
        if match.category is Category.COLLECTIVE_TIMEOUT and not self._timed_out:
            self._timed_out = True
            self._preparing_at_timeout = self._preparing
        return match

    def _explain_system_errors(self) -> None:
        """NCCL's `unhandled system error` stands for the failure its `Last error:` names on the
        next line (a library it could not open, a segment it could not create): that line is the
        cause, the system errors just before it its symptoms."""
        for i, hit in enumerate(self._hits):
            if hit.match.signature == "nccl-system-error" and self.lines - hit.line <= _LAST_ERROR_SPAN:
                self._hits[i] = dataclasses.replace(hit, match=dataclasses.replace(hit.match, symptom=True))

    def _note_progress(self, text: str) -> None:
        # the last bar on the line: tqdm's updates, joined by carriage returns, are one line
        bars = list(_BAR_RE.finditer(text))
        if not bars:
            return
        bar = bars[-1]
        at = bar.start()
        start = max(
            text.rfind("\r", 0, at), text.rfind("]", 0, at), text.rfind("|", 0, at), at - _BAR_DESC - 1
        )
        desc = text[start + 1 : at].strip(" :.\t")
        if not _DATA_PREP_RE.search(desc) or _NOT_DATA_RE.search(desc):
            return  # another bar (training, evaluation, loading): says nothing of the data
        if int(bar.group(1)) >= 100:
            self._preparing = None
            return
        rank, _, _, _ = _culprit_fields(text, desc)
        self._preparing = _Hit(
            self.lines,
            text[:MAX_TEXT],
            LineMatch(
                Category.DATA_PIPELINE_ERROR,
                0.65,
                "data-preparation-outlasted-timeout",
                f"data preparation ({desc!r}, {bar.group(1)}%) was still running when the "
                f"collectives waiting for it timed out",
                rank=rank,
            ),
        )

    def _note_context(self, text: str) -> None:
        """Ranks present in the job, torchrun's "Root Cause" block (its rank and host) and the
        first child its agent saw fail (a log cut before the block still names it)."""
        m = _RANK_PREFIX_RE.search(text[:64])
        if m:
            rank = int(m.group(1) or m.group(2) or m.group(3))
            _add_bounded(self._ranks_seen, rank)
            if ('File "' in text or _TRACEBACK_START in text) and len(self._traceback_ranks) < 2:
                self._traceback_ranks.add(rank)
        if " NCCL " in text and (n := _NCCL_RE.match(_PREFIX_RE.sub("", text, count=1))):
            _add_bounded(self._nodes_seen, n.group(1))  # INFO lines too: which hosts the job ran on
        if "sigkill_handler] [" in text and (d := _DS_COMMAND_RE.search(text)):
            self._ds_command = (self.lines, int(d.group(1)))
        if self._launcher_failed is None and "exitcode" in text and (f := _LAUNCHER_FAILED_RE.search(text)):
            self._launcher_failed = (int(f.group(2)), int(f.group(1)))
            self._failure_text = (self.lines, text[:MAX_TEXT])
        elif (
            self._launcher_failed is None
            and "terminated with" in text
            and (f := _SPAWN_FAILED_RE.search(text))
        ):
            index = int(f.group(1))
            # its process index is the rank only on one node: not where the log names others
            if not self._ranks_seen or index in self._ranks_seen:
                code = int(f.group(3)) if f.group(3) else -_SIGNALS.get(f.group(2), 0)
                self._launcher_failed = (index, code)
                self._failure_text = (self.lines, text[:MAX_TEXT])
        if "Root Cause" in text and _ROOT_CAUSE_RE.search(text):
            self._in_root_cause = True
            return
        if self._in_root_cause:
            if text.startswith(("===", "---")):
                self._in_root_cause = False
            elif (r := re.match(r"\s*rank\s*:\s*(\d+)", text)) and self._root_cause_rank is None:
                self._root_cause_rank = int(r.group(1))
            elif (h := re.match(r"\s*host\s*:\s*(\S+)", text)) and self._root_cause_host is None:
                self._root_cause_host = h.group(1)
            elif (x := re.match(r"\s*exitcode\s*:\s*(-?\d+)", text)) and self._root_cause_exit is None:
                self._root_cause_exit = int(x.group(1))
                self._failure_text = (self.lines, text[:MAX_TEXT])

    def _in_context(self, signature: str) -> bool:
        """Whether a signature that holds only beside other lines has them: c10's CUDA check
        stands for a CUDA error whose message was cut only where no message (or C++ `what():`)
        came just before it (at a process's exit the watchdog's "driver shutting down" is
        teardown); DCP's `assert metadata is not None` only under a distributed-checkpoint frame;
        an exception is no code's under multiprocessing's clean-up at exit."""
        if signature == "c10-cuda-check":
            return self.lines - self._cuda_message_at > _CONTEXT_LINES
        if signature == "dcp-metadata-missing":
            return self.lines - self._dcp_frame_at <= _CONTEXT_LINES
        if signature == "python-exception":
            # multiprocessing's clean-up at exit (its semaphores, its resource tracker) failing
            # on what is already gone: noise
            return self.lines - self._exit_cleanup_at > 2
        return True

    def _drop_hits(self, signature: str) -> None:
        """Forget what a signature read earlier, once a later line shows it was a passing state
        (a start-up wait that ended, a slow first report that recovered)."""
        self._hits = [h for h in self._hits if h.match.signature != signature]

    def feed_all(self, lines: Iterable[str]) -> LogClassifier:
        for line in lines:
            self.feed(line)
        return self

    # --- verdict -----------------------------------------------------------------------------
    def _cause(self) -> _Hit | None:
        causes = [h for h in self._hits if not h.match.symptom]
        hardware = [
            h for h in causes if h.match.category.layer in _HARDWARE_LAYERS and h.match.strength >= 0.7
        ]
        if hardware:
            first = min(hardware, key=lambda h: h.line)
            # a PCIe link that failed and took its GPU with it: the lost GPU is what the node
            # needs acted on (drained), the AER lines stay as its evidence
            lost = [
                h for h in hardware if h.match.category is Category.GPU_FALLEN_OFF_BUS and h.line > first.line
            ]
            if first.match.category is Category.PCIE_ERROR and lost:
                return min(lost, key=lambda h: h.line)
            return first
        if causes:
            strong = [h for h in causes if h.match.strength >= 0.6]
            if strong:
                return min(strong, key=lambda h: h.line)
            return max(causes, key=lambda h: (h.match.strength, -h.line))
        if self._hits:
            return max(self._hits, key=lambda h: (h.match.strength, -h.line))
        return None

    def _root(self) -> _Hit | None:
        """The cause by the rules above; a collective timeout that came while a rank was still
        preparing its data is that preparation's (the waiting ranks' timeouts its consequences)."""
        root = self._cause()
        if (
            root is not None
            and root.match.category is Category.COLLECTIVE_TIMEOUT
            and self._preparing_at_timeout
        ):
            return self._preparing_at_timeout
        if root is None or (root.match.symptom and root.match.category.layer is Layer.COMMUNICATION):
            return self._rank_that_ended_itself(root) or self._error_of_the_lost_peer(root) or root
        return root

    def _error_of_the_lost_peer(self, root: _Hit | None) -> _Hit | None:
        """A rank's words for a peer that went away ("Connection closed by remote peer") name
        no fault of its own: another rank's memory running out before it (GPU or host: that
        ends the rank's process) is why that peer went away, however weakly it is worded. Not
        a warning of the kind every log holds (a loss spike, a slow read), and nothing printed
        after the loss."""
        if root is None or root.match.signature not in _PEER_LOST or root.match.rank is None:
            return None
        own = [
            h
            for h in self._hits
            if h.match.rank is not None
            and h.match.rank != root.match.rank
            and h.line < root.line
            and h.match.category in _ENDS_A_PROCESS
            and h.match.strength >= _PEER_ERROR_STRENGTH
        ]
        return max(own, key=lambda h: (h.match.strength, -h.line), default=None)

    def _rank_that_ended_itself(self, root: _Hit | None) -> _Hit | None:
        """The rank the launcher saw fail first, where what the log holds besides is only its
        peers losing it: one that exited with a code of its own (`sys.exit(3)`, an error printed
        elsewhere) failed as the program, on every run; one a crash signal ended with nothing
        printed (an abort, a segfault in native code) is where to look, no family saying why.
        The resets and timeouts the others print are its consequences."""
        if self._root_cause_rank is not None:
            rank, code = self._root_cause_rank, self._root_cause_exit
        elif (failure := self._launcher_failure) is not None:
            rank, code = failure
        else:
            return None
        if code is not None and -code in _CRASH_SIGNALS and not self._abort_explained(rank):
            # a watchdog's own abort prints its timeout first, and is read as that
            category, signature = Category.UNKNOWN, "rank-crashed"
            description = (
                f"rank {rank} was ended by {_CRASH_SIGNALS[-code]} (a crash in native code) with no "
                "error of its own before its peers lost it"
            )
        elif code is not None and 1 < code < 128 and (root is None or root.match.rank != rank):
            # not 1, any uncaught exception's (an OOM whose traceback went elsewhere too), nor 128
            # and up, a shell's report of a signal: neither says the program chose to end
            category, signature = Category.USER_CODE_ERROR, "rank-exited-itself"
            description = (
                f"rank {rank} exited with code {code} on its own (no signal) before its peers lost it"
            )
        elif (
            code == -9 and root is not None and root.match.signature in _PEER_LOST and root.match.rank != rank
        ):
            # the peers' "connection closed by peer" is the SIGKILLed rank's end, which the
            # launcher's own SIGKILL lines tell (usually the host OOM killer)
            return next((h for h in self._hits if h.match.signature in _KILLED), None)
        else:
            return None
        line, text = self._failure_text or (self.lines, f"rank {rank} exited with code {code}")
        return _Hit(line, text, LineMatch(category, 0.6, signature, description, rank=rank))

    def _abort_explained(self, rank: int) -> bool:
        """Whether a rank's SIGABRT/SIGSEGV is more than a crash of its own: it printed something
        itself, a C++ exception was thrown first (c10d takes the process down for a peer's error),
        ranks timed out waiting for it (a timeout names it), or a communication error the log
        gives no rank to may be its own."""
        return (
            self._threw_before_abort
            or self._timeout_culprit() is not None
            or any(
                h.match.rank == rank
                or (h.match.rank is None and h.match.category.layer is Layer.COMMUNICATION)
                for h in self._hits
            )
        )

    def _timeout_culprit(self) -> int | None:
        """The one rank that never reported a collective timeout while all the others did."""
        timed_out = {
            h.match.rank
            for h in self._hits
            if h.match.category is Category.COLLECTIVE_TIMEOUT and h.match.rank is not None
        }
        if len(timed_out) < 2:
            return None
        # Ranks 0..top where top is the highest seen: exactly one of them is silent when all
        # but one timed out. Counted, not listed: a log's `[rank900000000]` costs nothing.
        top = max(self._ranks_seen | timed_out)
        if top + 1 - len(timed_out) != 1:
            return None
        return top * (top + 1) // 2 - sum(timed_out)

    def _culprit(self, root: _Hit, same: list[_Hit]) -> Culprit:
        """The root line's own rank/node/GPU; missing ones come from lines of the same category
        (torchrun's `local_rank: 3` next to a kernel OOM line), then torchrun's Root Cause block."""
        m = root.match
        rank = m.rank
        if m.signature in _LOST_A_PEER:
            return Culprit()  # the rank that printed it is the one left waiting
        if m.category is Category.COLLECTIVE_TIMEOUT:
            # the one silent rank, else a line that names the late rank itself (a timeout's
            # own rank is the one that waited)
            rank = self._timeout_culprit()
            if rank is None:
                rank = next(
                    (
                        h.match.rank
                        for h in same
                        if h.match.signature in _NAME_THE_LATE_RANK and h.match.rank is not None
                    ),
                    None,
                )
        elif rank is None and m.signature == "data-preparation-outlasted-timeout":
            rank = self._timeout_culprit()  # the one rank not waiting is the one preparing
        elif rank is None:
            # a preemption stops every rank; a desync's first rank to fail is one party of it,
            # not the one that called the wrong collective
            fallback = (
                None
                if m.category is Category.PREEMPTION or m.signature == "collective-mismatch"
                else self._first_failed_rank
            )
            rank = next((h.match.rank for h in same if h.match.rank is not None), fallback)
            if rank is None and m.category.layer in _OWN_ERROR_LAYERS:
                rank = self._only_traceback_rank(m.category)
        if m.signature in _KILLED and self._first_failed_rank is not None:
            # the agent's SIGKILL line says `local_rank: 0`; its Root Cause block, the global rank
            rank = self._first_failed_rank
        if rank is not None and self._per_node_launcher:
            tasks = (_SRUN_TASK_RE.search(h.text) for h in (root, *same))
            if any(task is not None and int(task.group(1)) == rank for task in tasks):
                rank = None
        node = m.node
        if node is None and (m.rank is None or m.rank == self._root_cause_rank or m.signature in _KILLED):
            node = self._root_cause_host
        if node is None and len(self._nodes_seen) == 1:
            node = next(iter(self._nodes_seen))
        return Culprit(rank=rank, node=node, gpu=m.gpu)

    def _only_traceback_rank(self, category: Category) -> int | None:
        """The rank whose traceback a log cut to one rank's output shows (its frames prefixed, its
        unprefixed error line the root): that rank's own error. Not where the log names any other
        rank, nor where that rank printed a symptom or another failure (it waited on, or saw die,
        the rank that failed)."""
        if len(self._ranks_seen) != 1 or len(self._traceback_ranks) != 1:
            return None
        rank = next(iter(self._traceback_ranks))
        if rank not in self._ranks_seen or any(
            h.match.rank == rank and (h.match.symptom or h.match.category is not category) for h in self._hits
        ):
            return None
        return rank

    @property
    def _launcher_failure(self) -> tuple[int, int] | None:
        """(rank, exit code) of the first child torchrun's agent reported failed, where that
        names a rank of the job: its local rank is the global one only on one node (no second
        node seen, no Root Cause block naming a global rank), and a child it stopped with
        SIGTERM (-15) did not fail."""
        failed = self._launcher_failed
        if failed is None or failed[1] == -15 or len(self._nodes_seen) > 1 or self._root_cause_host:
            return None
        return failed

    @property
    def _first_failed_rank(self) -> int | None:
        if self._root_cause_rank is not None:
            return self._root_cause_rank
        failure = self._launcher_failure
        return None if failure is None else failure[0]

    def cause(self) -> LineMatch | None:
        """What the line the verdict rests on says (its category, strength and whether it is a
        symptom); None where nothing in the log explains the failure."""
        root = self._root()
        return None if root is None else root.match

    def verdict(self) -> Verdict:
        cfg = self.config
        root = self._root()
        if root is None:
            # no cause, but where the launcher saw a rank fail first, that rank is where to look
            rank = self._first_failed_rank
            failed = "" if rank is None else f"; the launcher saw rank {rank} fail first"
            failure = self._launcher_failure
            if self._root_cause_rank is None and failure is not None:  # the rank is its
                failed += f" (exit code {failure[1]})"
            return Verdict(
                Category.UNKNOWN,
                0.0,
                f"no known failure signature in {self.lines} line(s) of {self.source}{failed}",
                Culprit(rank=rank, node=self._root_cause_host if rank is not None else None),
            )
        category = root.match.category
        same = sorted((h for h in self._hits if h.match.category is category), key=lambda h: h.line)
        same_count = sum(self._counts[sig] for sig in {h.match.signature for h in same})
        confidence = min(0.99, root.match.strength + 0.05 * max(0, min(2, same_count - 1)))
        evidence_hits = [root] + [h for h in same if h is not root][: cfg.max_evidence - 1]
        evidence = [
            Evidence(h.text, f"file:{self.source}", rank=h.match.rank, line=h.line) for h in evidence_hits
        ]
        shown = {h.line for h in evidence_hits}
        others = sorted((h for h in self._hits if h.line not in shown), key=lambda h: h.line)
        consequences = [f"line {h.line}: {h.text[:200]}" for h in others[: cfg.max_consequences]]
        if len(others) > cfg.max_consequences:
            consequences.append(f"... and {len(others) - cfg.max_consequences} more")
        culprit = self._culprit(root, same)
        verdict = Verdict(
            category,
            confidence,
            self._summary(root, culprit, others),
            culprit,
            evidence=evidence,
            consequences=consequences,
        )
        return verdict.thresholded(cfg.threshold)

    def _summary(self, root: _Hit, culprit: Culprit, others: list[_Hit]) -> str:
        where = ", ".join(
            f"{k} {v}"
            for k, v in (("rank", culprit.rank), ("node", culprit.node), ("GPU", culprit.gpu))
            if v is not None
        )
        pci = root.match.pci
        if pci and root.match.xid is not None:
            where = ", ".join(filter(None, [where, f"PCI {pci}"]))
        text = f"{root.match.category.value}: {root.match.description}"
        text += f" on {where}" if where else ""
        text += f" (line {root.line})"
        repeats = self._app_xids_per_gpu.get(pci or "", 0)
        if root.match.xid in APP_SIDE_XIDS and repeats >= 3:
            text += (
                f"; application-side Xids repeat {repeats} times on this GPU, suspect the "
                f"hardware if it recurs across jobs"
            )
        symptoms: dict[Category, set[int]] = defaultdict(set)
        n_symptoms = 0
        for h in others:
            if h.match.symptom or h.match.category is not root.match.category:
                n_symptoms += 1
                if h.match.rank is not None:
                    symptoms[h.match.category].add(h.match.rank)
        if n_symptoms:
            ranks = sorted(set().union(*symptoms.values())) if symptoms else []
            on = f" on rank(s) {_ranges(ranks)}" if ranks else ""
            text += f"; {n_symptoms} other error line(s){on} are treated as its consequences"
        return text


def _ranges(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 4] -> '0-2,4': a 512-rank cascade stays one readable sentence."""
    parts: list[str] = []
    start: int | None = None
    prev: int | None = None
    for r in ranks:
        if start is None or prev is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            parts.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = r
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(parts)


_T = TypeVar("_T")


def _add_bounded(seen: set[_T], value: _T) -> None:
    """Remember `value` while fewer than `MAX_DISTINCT` are remembered: a log of a million
    distinct rank prefixes or host names costs a bounded set, not one entry per line."""
    if len(seen) < MAX_DISTINCT:
        seen.add(value)


def classify_lines(
    lines: Sequence[str] | Iterable[str], source: str = "log", config: LogClassifierConfig | None = None
) -> Verdict:
    """One verdict for a whole log: root cause, culprit, evidence and consequences."""
    return LogClassifier(source, config).feed_all(lines).verdict()
