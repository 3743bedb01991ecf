"""The textual signatures of the failure taxonomy: which log lines name which category.

One table, so adding a form seen in the wild is one row. Each row says how strongly the line alone
supports its category and whether it is a *symptom* (a line every rank prints once something else
went wrong: watchdog timeouts, "connection reset by peer", torchrun's SIGKILL summary). Symptoms
decide a verdict only when no causal line is present; that is how an NCCL watchdog timeout on
every rank does not outvote one rank's ECC error. Xid lines are mapped per code (docs/field-facts.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeAlias

from triage.taxonomy import Category

_C = Category


@dataclass(frozen=True)
class Signature:
    """One known form of a failure line.

    `keyword` holds lower-case literals separated by `|`, one of which every matching line
    contains: the classifier checks them before running the regex, which keeps large logs cheap. `strength` is the confidence the line
    gives on its own, in [0, 1].
    """

    id: str
    category: Category
    keyword: str
    pattern: str
    strength: float
    description: str
    symptom: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    keywords: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.strength <= 1.0:
            raise ValueError(f"signature {self.id}: strength must lie in (0, 1]")
        if self.keyword != self.keyword.lower():
            raise ValueError(f"signature {self.id}: keyword must be lower case")
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE))
        object.__setattr__(self, "keywords", tuple(self.keyword.split("|")))


def _s(
    id: str,
    category: Category,
    keyword: str,
    pattern: str,
    strength: float,
    description: str,
    symptom: bool = False,
) -> Signature:
    return Signature(id, category, keyword, pattern, strength, description, symptom)


#: Python's exceptions that, closing a traceback, are the training code's own mistake.
_CODE_EXCEPTIONS = (
    r"(?:KeyError|IndexError|ValueError|TypeError|AttributeError|NameError|AssertionError"
    r"|ZeroDivisionError|NotImplementedError|FileNotFoundError|UnboundLocalError|SyntaxError"
    r"|IsADirectoryError|FileExistsError)"
)

SIGNATURES: tuple[Signature, ...] = (
    # --- gpu: hardware faults reported to the application -------------------------------------
    _s(
        "cuda-ecc-uncorrectable",
        _C.GPU_MEMORY_ERROR,
        "ecc",
        r"uncorrectable ECC error|ECC_UNCORRECTABLE|cudaErrorECCUncorrectable",
        0.95,
        "uncorrectable ECC error reported by CUDA",
    ),
    _s(
        "ecc-double-bit",
        _C.GPU_MEMORY_ERROR,
        "double bit|double-bit|dbe",
        r"double[- ]bit (?:ECC )?error|\bDBE\b.*detected",
        0.9,
        "double-bit ECC error",
    ),
    _s(
        "row-remap-failure",
        _C.GPU_MEMORY_ERROR,
        "remap|uncorrectable",
        # and nvidia-smi -q: a non-zero uncorrectable count (its ECC or Remapped Rows section)
        r"row remap(?:ping)? fail|remapping failure|Row Remapper"
        r"|^\s*Uncorrectable(?: Error)?\s*:\s*[1-9]\d*\s*$",
        0.8,
        "HBM row remapping event",
    ),
    _s(
        "gpu-fallen-off-bus",
        _C.GPU_FALLEN_OFF_BUS,
        "fallen off",
        r"fallen off (?:the|of the) bus",
        0.95,
        "GPU has fallen off the bus",
    ),
    _s(
        "gpu-is-lost",
        _C.GPU_FALLEN_OFF_BUS,
        "gpu is lost|gpu_is_lost|gpuislost|device handle",
        # nvidia-smi's "Unable to determine the device handle for GPU<bus id>: Unknown Error"
        # (or "GPU is lost"): NVML cannot reach the GPU any more
        r"GPU is lost|NVML_ERROR_GPU_IS_LOST|GpuIsLost"
        r"|Unable to determine the device handle for GPU\s*[0-9a-fA-F:.]+: (?:Unknown Error|GPU is lost)",
        0.9,
        "NVML reports the GPU is lost",
    ),
    _s(
        "rm-init-adapter-failed",
        _C.GPU_FALLEN_OFF_BUS,
        "rminitadapter",
        r"RmInitAdapter failed",
        0.75,
        "the driver could not initialise the GPU",
    ),
    _s(
        "gsp-rpc-timeout",
        _C.GPU_FALLEN_OFF_BUS,
        "gsp",
        r"Timeout (?:after \d+s )?(?:of )?waiting for RPC (?:response )?from (?:GPU\d+ )?GSP",
        0.85,
        "GSP firmware stopped answering",
    ),
    _s(
        "nvlink-cuda-error",
        _C.NVLINK_ERROR,
        "nvlink",
        r"NVLink error was detected|cudaErrorNvlinkUncorrectable|NVLink: fatal error"
        r"|uncorrectable NVLink error",
        0.9,
        "NVLink error",
    ),
    # NVLink SHARP (NVLS) needs the NVSwitch multicast set up by the Fabric Manager: a CUDA
    # failure inside NCCL's NVLS transport is that fabric's fault, not the application's.
    _s(
        "nccl-nvls-failure",
        _C.NVLINK_ERROR,
        "nvls.cc",
        r"transport/nvls\.cc:\d+ NCCL WARN",
        0.75,
        "NVLink SHARP (NVSwitch multicast) failed in NCCL",
    ),
    _s(
        "nvls-bind-multicast",
        _C.NVLINK_ERROR,
        "nvls|nvswitches",
        r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory"
        r"|configuration error in the Fabric Manager or NVSwitches",
        0.8,
        "NCCL could not bind NVSwitch multicast memory (Fabric Manager / NVSwitch)",
    ),
    _s(
        "fabric-manager-not-ready",
        _C.NVLINK_ERROR,
        "not yet initialized",
        r"system not yet initialized",
        0.7,
        "CUDA 802: the NVSwitch fabric is not up (Fabric Manager)",
    ),
    # NVSwitch systems cannot use their GPUs together while the fabric manager is down; a fabric
    # manager built for another driver is the node's software set-up, not its fabric
    _s(
        "fabric-manager-down",
        _C.NVLINK_ERROR,
        "fabric manager|fabricmanager",
        r"[Ff]abric ?[Mm]anager (?:is |was )?not (?:running|started|active)",
        0.7,
        "the NVSwitch Fabric Manager is not running",
    ),
    # its service failing: for the fabric, or for a version that does not fit the driver (said
    # on the lines before, which then win)
    _s(
        "fabric-manager-service-failed",
        _C.NVLINK_ERROR,
        "fabricmanager",
        r"nvidia-fabricmanager\.service: (?:Failed with result|Main process exited, code=exited, status=[1-9])",
        0.6,
        "the NVSwitch Fabric Manager's service failed",
    ),
    _s(
        "fabric-manager-version-mismatch",
        _C.ENVIRONMENT_ERROR,
        "fabric manager|fabricmanager",
        r"[Ff]abric ?[Mm]anager.{0,80}(?:version.{0,60}(?:(?:does not|doesn'?t|don'?t|do not) match|mismatch|incompatible)"
        r"|(?:(?:does not|doesn'?t|don'?t|do not) match|mismatch).{0,40}driver version)",
        0.75,
        "the Fabric Manager's version does not match the GPU driver's",
    ),
    _s(
        "nvswitch-sxid",
        _C.NVLINK_ERROR,
        "sxid",
        r"nvswitch\d*: SXid|\bSXid\b.*\d",
        0.8,
        "NVSwitch error (SXid)",
    ),
    # DCGM's health watch and diagnostic (dcgmi health / dcgmi diag) in its own words: what it
    # found on which GPU
    _s(
        "dcgm-gpu-memory",
        _C.GPU_MEMORY_ERROR,
        "retired pages|page retirements|faulty memory|double-bit ecc|row remap|rows were remapped",
        # not "A pending retired page has been detected": DCGM says that GPU can go on working
        r"retired pages have been detected in GPU \d+"
        r"|retired pages due to DBEs have been detected|Pending page retirements together with a DBE"
        r"|Found \d+ faulty memory elements on GPU \d+|CUDA APIs have indicated that a double-bit ECC error"
        r"|GPU \d+ had (?:uncorrectable )?memory errors and (?:\d+ rows were remapped|row remappings are pending)",
        0.8,
        "DCGM found GPU memory errors (retired pages, remapped rows, faulty memory)",
    ),
    _s(
        "dcgm-memory-mismatch",
        _C.SILENT_DATA_CORRUPTION,
        "memory mismatch|miscompare",
        r"A memory mismatch was detected on GPU \d+, but no error was reported|Detected a miscompare failure in the L1 cache",
        0.8,
        "DCGM found the GPU computing or storing wrong values with no error reported",
    ),
    _s(
        "dcgm-nvlink",
        _C.NVLINK_ERROR,
        "nvlink|nvswitch",
        # errors where there should be none, or too many per second; not the count above a
        # threshold, which DCGM says the link can carry on with
        r"NvLink errors on GPU \d+'s NVLink \(should be 0\)|NvLink errors found occuring per second on GPU"
        r"|GPU \d+'s NvLink link \d+ is currently down|Only \d+ NvLinks are up out of the expected"
        r"|Detected fatal errors on NvSwitch \d+ link|NvSwitch physical ID \d+'s NvLink port \d+ is currently down"
        r"|NVSwitch \d+'s NvLink \d+ is down",
        0.8,
        "DCGM found NVLink or NVSwitch link errors",
    ),
    _s(
        "dcgm-pcie",
        _C.PCIE_ERROR,
        "pcie replays|pci link|pcie replay violation",
        r"Detected more than \d+ PCIe replays per minute for GPU|host-side PCIe replay violation"
        r"|is running at PCI link (?:generation|width) \d+X?, which is below the minimum",
        0.75,
        "DCGM found the GPU's PCIe link degraded (replays, a lower generation or width)",
    ),
    _s(
        "dcgm-thermal-violation",
        _C.GPU_THROTTLING,
        "violation|user-specified maximum",
        r"clocks event due to (?:thermal|power) violation|thermal violation"
        r"|Detected clock throttling due to (?:thermal|power) violation in GPU"
        r"|Temperature \d+ of GPU \d+ exceeded user-specified maximum",
        0.8,
        "clock slowdown from a thermal/power violation",
    ),
    _s(
        "smi-hw-slowdown-active",
        _C.GPU_THROTTLING,
        "slowdown",
        r"(?:HW|SW Thermal|HW Thermal|HW Power Brake) Slowdown\s*:\s*Active",
        0.75,
        "nvidia-smi shows an active hardware slowdown",
    ),
    # --- host ----------------------------------------------------------------------------------
    _s(
        "aer-uncorrectable",
        _C.PCIE_ERROR,
        "aer|pcie",
        r"AER:.*Uncorrect(?:ed|able)|severity=Uncorrect",
        0.85,
        "uncorrectable PCIe error (AER)",
    ),
    _s(
        "aer-corrected",
        _C.PCIE_ERROR,
        "pcie",
        r"PCIe Bus Error: severity=Correct",
        0.6,
        "corrected PCIe errors (AER)",
    ),
    # the IOMMU refusing a device's DMA (AMD-Vi's IO_PAGE_FAULT, Intel's DMAR fault): GPU peer-to-
    # peer traffic that crosses it is dropped or crawls, so NCCL hangs or data comes back wrong
    # while the GPUs look healthy; the fix is on the host (iommu=pt, or off, or ACS disabled).
    # Sure only where the device is a GPU's or an RDMA NIC's: a NIC's, a disk controller's or an
    # integrated GPU's page faults are common and harmless to the job, and Intel's lines name no
    # driver, so those stay weak (they decide only a log with nothing else in it).
    _s(
        "iommu-dma-fault-gpu",
        _C.PCIE_ERROR,
        "io_page_fault",
        r"\b(?:nvidia|amdgpu|mlx5_core|habanalabs|neuron) [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: "
        r"AMD-Vi: Event logged \[IO_PAGE_FAULT",
        0.7,
        "the IOMMU blocked a GPU's or NIC's DMA (peer-to-peer traffic between GPUs fails through it)",
    ),
    _s(
        "iommu-dma-fault",
        _C.PCIE_ERROR,
        "io_page_fault|access is not set",
        r"AMD-Vi: Event logged \[IO_PAGE_FAULT|DMAR: \[DMA (?:Write|Read)[^\]]*\] Request device .{0,120}?"
        r"PTE (?:Write|Read) access is not set",
        0.5,
        "the IOMMU blocked a device's DMA (if a GPU's, peer-to-peer traffic fails through it)",
    ),
    _s(
        "aer-corrected-received",
        _C.PCIE_ERROR,
        "aer",
        r"AER: (?:Multiple )?Correct(?:ed|able) error",
        0.6,
        "corrected PCIe errors (AER)",
    ),
    _s(
        "oom-killer",
        _C.HOST_OOM,
        "out of memory",
        r"Out of memory: Kill(?:ed)? process|Memory cgroup out of memory",
        0.95,
        "the kernel OOM killer killed a process",
    ),
    _s(
        "oom-kill-constraint",
        _C.HOST_OOM,
        "oom-kill|oom_kill",
        # slurmstepd says "oom-kill event(s)" up to 20.11 and "oom_kill event in StepId=" since
        r"oom-kill:constraint|oom[-_]kill event",
        0.9,
        "the kernel OOM killer fired",
    ),
    _s("oom-invoked", _C.HOST_OOM, "oom-killer", r"invoked oom-killer", 0.85, "the kernel OOM killer fired"),
    _s(
        "cgroup-oom-handler",
        _C.HOST_OOM,
        "out-of-memory handler",
        r"killed by the cgroup out-of-memory handler",
        0.9,
        "the cgroup OOM handler killed a task",
    ),
    _s(
        "platform-oom-killer",
        _C.HOST_OOM,
        "oom killer|oom-killer|oomkiller",
        # said as a fact (PAI's job summary, systemd's unit), not advice or a guess ("likely
        # killed by OOM killer" after an exit 137, which torchrun's own SIGKILL also gives)
        r"^(?!.*\b(?:likely|possibly|probably|may|might|could|avoid|if|prevent)\b).*"
        r"\bkilled by (?:the )?\"?OOM[- ]?killer\b",
        0.85,
        "the platform's OOM killer ended the job",
    ),
    _s(
        "replica-out-of-memory",
        _C.HOST_OOM,
        "ran out-of-memory",
        # Vertex AI's (and Cloud ML Engine's) word for a replica the host's OOM killer ended
        r"The replica \S+(?: \d+)? ran out-of-memory and exited",
        0.85,
        "a training replica ran out of host memory",
    ),
    _s(
        "dataloader-killed",
        _C.HOST_OOM,
        "dataloader worker",
        r"DataLoader worker \(pid[^)]*\) is killed by signal: Killed",
        0.75,
        "a DataLoader worker was SIGKILLed (host memory)",
    ),
    # the host's allocator refused: C++'s bad_alloc, PyTorch's CPU allocator, fork/mmap's ENOMEM
    # (a DataLoader starting its workers)
    _s(
        "host-alloc-refused",
        _C.HOST_OOM,
        "bad_alloc|not enough memory|errno 12|defaultcpuallocator",
        r"terminate called after throwing an instance of 'std::bad_alloc'"
        r"|DefaultCPUAllocator: (?:not enough memory|can't allocate memory)"
        r"|OSError: \[Errno 12\] Cannot allocate memory",
        # below the host layer's 0.7 that outranks every other cause: a request the code sized
        # wrong (hundreds of GB) or a mapping limit reads the same
        0.65,
        "the host could not allocate memory",
    ),
    # PBS's own limits: its memory limit (the host's memory for the job) and its walltime
    _s(
        "pbs-mem-limit",
        _C.HOST_OOM,
        "pbs",
        r"PBS: job killed: v?mem (?:job total )?\S+ ?kb exceeded limit",
        0.85,
        "PBS killed the job for exceeding its memory limit",
    ),
    _s(
        "pbs-walltime",
        _C.PREEMPTION,
        "pbs",
        r"PBS: job killed: walltime \d+ exceeded limit",
        0.9,
        "PBS killed the job at its walltime limit",
    ),
    _s(
        "python-memoryerror",
        _C.HOST_OOM,
        "memoryerror",
        r"^\s*MemoryError\b",
        0.6,
        "Python MemoryError (host memory exhausted)",
    ),
    _s(
        "torchrun-sigkill",
        _C.HOST_OOM,
        "sigkill",
        r"Signal 9 \(SIGKILL\) received by PID",
        0.55,
        "a rank was SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    _s(
        "torchrun-exitcode-9",
        _C.HOST_OOM,
        "exitcode",
        r"failed \(exitcode: -9\)",
        0.55,
        "a rank was SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    # DeepSpeed's and Accelerate's launchers report the same SIGKILL in their own words; with no
    # Python error beside it the host OOM killer is the usual sender, hence a symptom's strength.
    # torch.multiprocessing.spawn (and so mp.spawn-based launchers) names the child by its
    # process index, the local rank.
    _s(
        "mp-spawn-sigkill",
        _C.HOST_OOM,
        "sigkill",
        r"process \d+ terminated with signal SIGKILL",
        0.55,
        "a spawned rank was SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    _s(
        "lightning-child-sigkill",
        _C.HOST_OOM,
        "terminated with code",
        r"Child process with PID \d+ terminated with code -9\b",
        0.55,
        "a Lightning rank's child was SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    _s(
        "launcher-child-sigkill",
        _C.HOST_OOM,
        "return code|sigkill",
        r"exits with return code = -9\b|died with <Signals\.SIGKILL: 9>",
        0.55,
        "a launcher's child was SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    _s(
        "exit-code-137",
        _C.HOST_OOM,
        "exit code|exitcode|exit status|exited with",
        r"exit(?:ed with)? ?(?:code|status)\s*[:=]?\s*137\b",
        0.55,
        "a container exited 137 (SIGKILL, usually the OOM killer)",
        symptom=True,
    ),
    # Dask's nanny restarting a worker over its memory budget; YARN killing a Spark executor's
    # container over its limit
    _s(
        "dask-yarn-memory-kill",
        _C.HOST_OOM,
        "memory budget|exceeding memory limits",
        r"Worker(?: \S+(?: \(pid=\d+\))?)? exceeded \d+% memory budget\. Restarting"
        r"|Container killed by YARN for exceeding (?:physical )?memory limits",
        0.8,
        "a worker was killed over its memory limit (Dask's nanny, YARN)",
    ),
    _s(
        "k8s-oomkilled",
        _C.HOST_OOM,
        "oomkilled",
        r"\bOOMKilled\b",
        0.9,
        "Kubernetes OOM-killed the container (memory limit)",
    ),
    # Slurm's and LSF's own kills of a job over its memory limit: Slurm then cancels the job,
    # which reads as a cancellation from outside unless this names why
    _s(
        "scheduler-memory-limit",
        _C.HOST_OOM,
        "memory limit|term_memlimit",
        # (not "Exceeded job memory limit at some point.": a warning, the job may complete)
        r"exceeded (?:job )?memory limit(?! at some point)|TERM_MEMLIMIT: job killed",
        0.9,
        "the scheduler killed the job for exceeding its memory limit",
    ),
    # Ray's memory monitor kills a worker when the node's host memory passes its threshold; the
    # exception is named OutOfMemoryError but says nothing of the GPU.
    _s(
        "ray-memory-monitor-kill",
        _C.HOST_OOM,
        "running low on memory|memory pressure|rayoutofmemoryerror",
        r"was killed due to the node running low on memory"
        r"|Workers \(tasks / actors\) killed due to memory pressure \(OOM\)"
        # older Ray's memory monitor raised in the task itself, past its threshold
        r"|RayOutOfMemoryError: More than \d+% of the memory on node",
        0.85,
        "Ray killed a worker: the node ran low on host memory",
    ),
    # Ray prints its OOM-prevention advice with its memory monitor's report of a kill; Ray
    # retries what it killed, so the advice alone is a symptom
    _s(
        "ray-oom-advice",
        _C.HOST_OOM,
        "ray-oom-prevention",
        r"docs\.ray\.io/\S*/ray-oom-prevention",
        0.55,
        "Ray's memory monitor killed a worker (host memory)",
        symptom=True,
    ),
    # A shell's report of a child it lost to SIGKILL (`script: line 10:    93 Killed   cmd`) and
    # mpirun's: no Python error beside them, so the OOM killer is the usual sender.
    _s(
        "shell-child-killed",
        _C.HOST_OOM,
        "killed",
        # an interactive shell prints only "Killed" for its foreground job
        r"\bline \d+:\s+\d+ Killed\s+\S|^\s*Killed\s*$",
        0.55,
        "the shell's child was SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    _s(
        "mpirun-signal-9",
        _C.HOST_OOM,
        "signal 9",
        r"process rank \d+ .{0,80}exited on signal 9 \(Killed\)",
        0.55,
        "mpirun reports a rank SIGKILLed (usually the host OOM killer)",
        symptom=True,
    ),
    _s(
        "ray-worker-died",
        _C.HOST_OOM,
        "worker process has died",
        r"actor is dead because its worker process has died",
        0.55,
        "a Ray worker process died without a Python error (usually the OOM killer)",
        symptom=True,
    ),
    # Hugging Face datasets failing to build a dataset from its files (a malformed JSON file)
    # MindSpore's data engine: a dataset that yields rows or batches slower than the device
    # consumes them (its `GetNext` times out next). A warning a run often trains on through, so
    # a symptom: it decides only a log where nothing else failed
    _s(
        "mindspore-slow-pipeline",
        _C.DATA_PIPELINE_ERROR,
        "bad performance attention",
        r"Bad performance attention, it takes more than \d+ seconds to (?:generator\.__next__|fetch(?: and send)? a batch)",
        0.6,
        "the input pipeline is too slow: a row or batch took longer than the device waits for it",
        symptom=True,
    ),
    _s(
        "hf-dataset-generation",
        _C.DATA_PIPELINE_ERROR,
        "not able to read records|generating the dataset|datasetgenerationerror",
        r"Not able to read records in the JSON file|An error occurred while generating the dataset"
        r"|\bDatasetGenerationError\b",
        0.85,
        "the dataset could not be built from its files",
    ),
    _s(
        "torch-shm-full",
        _C.DATA_PIPELINE_ERROR,
        "torch_|shared memory",
        r"unable to (?:write to|open shared memory object|allocate shared memory).*</?torch_"
        r"|(?:bus error|killed).{0,60}insufficient shared memory \(shm\)",
        0.8,
        "shared memory (/dev/shm) for DataLoader workers is exhausted",
    ),
    _s(
        "no-space",
        _C.STORAGE_ERROR,
        "no space left|not enough disk space",
        r"No space left on device|Not enough disk space",
        0.9,
        "no space left on device",
    ),
    # numpy's `tofile` writing a short array: the write returned 0 bytes (a full disk or quota;
    # NumPy says no more than the counts)
    _s(
        "short-write",
        _C.STORAGE_ERROR,
        "requested and",
        r"OSError: \d+ requested and \d+ written",
        0.7,
        "a file write stopped short (the disk or quota is full)",
    ),
    # ENODATA from a file read: a parallel file system failing under load (Lustre and FSx for
    # Lustre return it when a file's objects cannot be read), not the job's data
    _s(
        "enodata",
        _C.STORAGE_ERROR,
        "errno 61",
        # not an extended attribute that is not set, nor a sysfs or procfs file
        r"^(?!.*xattr).*\[Errno 61\] No data available(?!: '?/(?:sys|proc)/)",
        0.65,
        "the file system could not read a file's data (ENODATA)",
    ),
    # MIOpen's kernel database is SQLite: on a parallel file system without POSIX locks (Lustre
    # mounted without flock) every access fails; the fix is a user db on local disk
    _s(
        "miopen-sqlite-locking",
        _C.STORAGE_ERROR,
        "sqlite database",
        # its error, not the warning it prints when it falls back to running without the database
        r"MIOpen Error: .*error while accessing SQLite database: (?:locking protocol|database is locked|disk I/O error)",
        0.65,
        "MIOpen's SQLite kernel database cannot lock its file (a file system without POSIX locks)",
    ),
    # the object store under checkpoints or data refusing service (TensorFlow's GCS file system,
    # boto's S3 client): a 5xx or throttle after the client's own retries, not a missing object,
    # nor a retry the client announces (it may well succeed)
    _s(
        "object-store-unavailable",
        _C.STORAGE_ERROR,
        "http response code|when calling the",
        r"^(?!.*(?:will be automatically retried|attempt \d+ out of \d+|[Rr]etrying))"
        r"(?:.*Error executing an HTTP request: HTTP response code (?:5\d\d|429)\b"
        r"|.*An error occurred \((?:SlowDown|ServiceUnavailable|InternalError|RequestTimeout|Throttling(?:Exception)?"
        r"|5\d\d)\) when calling the \w+ operation)",
        0.65,
        "the object store (GCS, S3) refused service: a 5xx or throttling after retries",
    ),
    # ENOTCONN on a file: the daemon behind a FUSE mount (gcsfuse, s3fs, Alluxio, Google Drive)
    # went away. Only with a file path or a file-system layer named: on a socket (a `.sock` or a
    # `sockets/` path, zmq's, Python's socket.close) it is the network's. Below the host faults
    # that outrank the whole log: a pod's termination stops its FUSE sidecar first, and a
    # preemption printed before it is the cause; the timeouts and worker deaths after it are not.
    _s(
        "fuse-mount-gone",
        _C.STORAGE_ERROR,
        "transport endpoint is not connected",
        r"'/(?![^']*(?:\.sock'|/sockets?/))[^']*': Transport endpoint is not connected"
        r"|Transport endpoint is not connected: '/(?![^']*(?:\.sock'|/sockets?/))"
        r"|file_system\S*\s.{0,40}Transport endpoint is not connected"
        # a file writer's own (safetensors' Rust IoError): a file, never a socket
        r"|Error while serializing: IoError\(Os \{ code: 107, kind: NotConnected",
        0.65,
        "a mounted file system's daemon went away (Transport endpoint is not connected)",
    ),
    # a kernel stack frame in a network or cluster file system's module: a process stuck in it
    # (a hung task's trace, GPFS's mmfs, NFS, Lustre, Ceph, FUSE)
    _s(
        "kernel-fs-frame",
        _C.STORAGE_ERROR,
        "+0x",
        # (not the FUSE daemon's own idle wait for requests, which any sysrq-t dump shows); below
        # the strength at which a host fault outranks everything else in the log: a stack may be
        # printed for a benign slow moment while the job fails of something else
        r"^(?!.*\b(?:request_wait_answer|fuse_dev_do_read|fuse_dev_read)\+)"
        r".*\+0x[0-9a-f]+/0x[0-9a-f]+ \[(?:mmfs\d*|gpfs\w*|nfsv?[34]?|lustre|lnet|ptlrpc|osc|mdc|lov|ldlm|ceph|fuse)\]\s*$",
        0.55,
        "a process stuck inside a network file system (a kernel stack in its module)",
    ),
    # NCCL refused the shared-memory segment by the host's permissions on /dev/shm (a container
    # or a node set up without it world-writable): the environment's, not a full disk
    _s(
        "nccl-shm-open-denied",
        _C.ENVIRONMENT_ERROR,
        "shm_open failed",
        r"NCCL WARN Call to shm_open failed : Permission denied",
        0.85,
        "NCCL may not create its shared-memory segment (/dev/shm's permissions)",
    ),
    # NCCL's shared-memory transport cannot create its segment: /dev/shm is full (a container's
    # 64 MB default); before the "unhandled system error" PyTorch raises for it
    _s(
        "nccl-shm-segment",
        _C.STORAGE_ERROR,
        "shared memory segment|failed to extend",
        # newer NCCL: "Error: failed to extend /dev/shm/nccl-Qb1c to 9637892 bytes"
        r"(?:Error while creating|while creating) shared memory segment /dev/shm/nccl"
        r"|failed to extend /dev/shm/nccl\S* to \d+ bytes",
        0.85,
        "NCCL could not create its shared-memory segment: /dev/shm is full or too small",
    ),
    _s("storage-full", _C.STORAGE_ERROR, "storagefull", r"StorageFull", 0.9, "no space left on device"),
    _s(
        "quota",
        _C.STORAGE_ERROR,
        "quota|errno 122",
        r"Disk quota exceeded|\[Errno 122\]",
        0.9,
        "disk quota exceeded",
    ),
    _s(
        "insufficient-disk-space",
        _C.STORAGE_ERROR,
        "disk space",
        # managed services' words for a full volume (SageMaker's artifact upload)
        r"Insufficient disk space|ran out of disk space",
        0.8,
        "the disk is full",
    ),
    _s(
        "tf-checkpoint-write-exhausted",
        _C.STORAGE_ERROR,
        "checkpoint file",
        r"Error writing \(tmp\) checkpoint file: .*Resource exhausted",
        0.85,
        "the disk filled while a checkpoint was written",
    ),
    _s(
        "stale-handle",
        _C.STORAGE_ERROR,
        "stale",
        r"Stale (?:NFS )?file handle",
        0.85,
        "stale file handle (network filesystem)",
    ),
    # a shared filesystem refusing the file lock HDF5 takes (NFS, Lustre without flock), and a
    # remote filesystem's server gone (EREMOTEIO, EHOSTDOWN from CIFS/NFS)
    _s(
        "fs-remote-refused",
        _C.STORAGE_ERROR,
        "unable to lock file|remote i/o error|errno 112",
        r"unable to lock file, errno = 11|\[Errno 121\] Remote I/O error|\[Errno 112\] Host is down",
        0.7,
        "a shared filesystem refused a file lock or its server is gone",
    ),
    # ECOMM: a network filesystem's server stopped answering a write (NFS, as HDF5 and Python
    # print it)
    _s(
        "fs-comm-error",
        _C.STORAGE_ERROR,
        "communication error on send",
        r"errno = 70, error message = 'communication error on send'|\[Errno 70\] Communication error on send",
        0.75,
        "the network filesystem stopped answering (communication error on send)",
    ),
    _s(
        "io-error",
        _C.STORAGE_ERROR,
        "input/output error|errno 5",
        # not an RDMA library's failed call (libfabric's fi_*, verbs' ibv_*, UCX, NCCL's net
        # plugins): the network's; a path that merely holds those letters is still a file
        r"^(?!.*(?:\b(?:fi|ibv)_\w+(?:\(\S*\))? failed\b|\bUCX\s+(?:ERROR|WARN)\b|\bNET/(?:OFI|IB)\b))"
        r".*(?:Input/output error|\[Errno 5\])",
        0.8,
        "filesystem I/O error",
    ),
    _s(
        "read-only-fs",
        _C.STORAGE_ERROR,
        "read-only file system",
        r"Read-only file system",
        0.75,
        "filesystem went read-only",
    ),
    _s(
        "kernel-fs-error",
        _C.STORAGE_ERROR,
        "error",
        r"EXT4-fs error|XFS .*error|Buffer I/O error on dev|blk_update_request: I/O error"
        r"|LustreError",
        0.8,
        "kernel filesystem / block device error",
    ),
    _s(
        "nfs-not-responding",
        _C.STORAGE_ERROR,
        "not responding",
        r"nfs: server \S+ not responding",
        0.8,
        "the NFS server stopped responding",
    ),
    _s("kernel-panic", _C.NODE_FAILURE, "kernel panic", r"Kernel panic - not syncing", 0.9, "kernel panic"),
    # a CPU that stopped taking interrupts: the node stops answering (a soft lockup or a hung
    # task is often lived through and is not read here)
    _s(
        "host-hard-lockup",
        _C.NODE_FAILURE,
        "hard lockup",
        r"Watchdog detected hard LOCKUP on cpu",
        # lived through where hardlockup_panic is off (the default), and seen spuriously on VMs:
        # weak, any named failure after it wins
        0.55,
        "a host CPU locked up hard (the NMI watchdog)",
    ),
    # the host's own hardware failing: an uncorrected machine check or DIMM error takes the node
    # down or poisons its memory (a corrected one is logged and lived with: not read here)
    _s(
        "host-hardware-uncorrected",
        _C.NODE_FAILURE,
        "hardware error| ue ",
        # fatal or context-corrupting only: an uncorrected error of severity "recoverable" is
        # survived (the kernel kills the process that touched it)
        r"\[Hardware Error\]:.*\b(?:severity: fatal|System Fatal|PCC)\b|\bEDAC \S+: \d+ UE\b",
        0.75,
        "the host's CPU or memory reported an uncorrected hardware error",
    ),
    # Determined's master losing the agent of the node a trial ran on
    _s(
        "agent-lost-with-containers",
        _C.NODE_FAILURE,
        "agent failure|agent failed|agent closed",
        r"allocation failed due to agent failure|agent failed while the container was running"
        r"|agent closed with allocated containers",
        0.7,
        "the node's agent was lost while the job's container ran on it",
    ),
    # Kubernetes' node controller: the node stopped reporting while the job's pod ran on it
    _s(
        "k8s-node-not-ready",
        _C.NODE_FAILURE,
        "nodenotready|is unresponsive",
        r"\bNodeNotReady\b.*Node is not ready|Node \S+ which was running pod \S+ is unresponsive",
        0.75,
        "the node stopped reporting to Kubernetes under the job",
    ),
    _s(
        "ray-node-dead",
        _C.NODE_FAILURE,
        "heartbeats",
        r"has been marked dead because .{0,40}missed too many heartbeats",
        0.85,
        "the Ray head lost a node's heartbeats",
    ),
    # What the driver prints about each actor on a lost node: the node's loss, said once per
    # actor, so a cause named beside it (a drain, a preemption) outranks it.
    _s(
        "ray-actor-node-died",
        _C.NODE_FAILURE,
        "its node has died|node has crashed|is dead or unavailable",
        # or its owner's: "The actor is dead because its owner has died. ... Owner's node has crashed."
        # and a task's: "Task failed because the node it was running on is dead or unavailable"
        r"actor (?:is dead|died) because its node has died|Owner's node has crashed"
        r"|the node it was running on is dead or unavailable",
        0.8,
        "a Ray actor died with its node",
        symptom=True,
    ),
    _s(
        "slurm-node-fail",
        _C.NODE_FAILURE,
        "node fail|node_fail",
        # and PBS's "job preempted (node failure)", "killed due to node failure"
        r"DUE TO NODE FAILURE|\bNODE_FAIL\b|Node failure on \S+|\(node failure\)|due to node failure",
        0.9,
        "the scheduler lost a node",
    ),
    _s(
        "orte-lost-daemon",
        _C.NODE_FAILURE,
        "lost communication",
        r"ORTE has lost communication with (?:a remote|its(?: remote)?) daemon",
        0.75,
        "mpirun lost a node's daemon (the node or its link went away)",
        symptom=True,
    ),
    # --- infrastructure -------------------------------------------------------------------------
    _s(
        "slurm-preempted",
        _C.PREEMPTION,
        "due to",
        r"DUE TO (?:PREEMPTION|JOB REQUEUE)",
        0.9,
        "the scheduler preempted the job",
    ),
    _s(
        "cloud-nodes-preempted",
        _C.PREEMPTION,
        "pre-empted|preemptionerror",
        r"\bPreemptionError\b|\b(?:got|was|were|been) pre-empted\b",
        0.85,
        "the cloud reclaimed the job's (low-priority or spot) nodes",
    ),
    # Kubernetes' graceful node shutdown (a spot VM reclaimed, a node drained) and GCE's own
    # record of a preemption
    _s(
        "node-shutdown-preempted",
        _C.PREEMPTION,
        "imminent node shutdown|instances.preempted|instance was preempted",
        r"Pod was terminated in response to imminent node shutdown|compute\.instances\.preempted"
        r"|\bInstance was preempted\b",
        0.85,
        "the node was shut down or the VM preempted under the job",
    ),
    # AWS Batch's reason for a job whose (spot) instance went away under it
    _s(
        "batch-host-terminated",
        _C.PREEMPTION,
        "host ec2",
        r"Host EC2 \(instance i-[0-9a-f]+\) terminated",
        0.8,
        "the cloud took the job's instance away (AWS Batch: host terminated)",
    ),
    _s(
        "slurm-time-limit",
        _C.PREEMPTION,
        "time limit",
        r"DUE TO TIME LIMIT",
        0.9,
        "the job hit its time limit",
    ),
    _s(
        "autoscaler-terminates-node",
        _C.PREEMPTION,
        "terminated soon",
        r"will be terminated soon \(reason: [\w-]*(?:termination|preempt|spot|drain)[\w-]*\)",
        0.7,
        "the cluster's autoscaler took the job's nodes away",
        symptom=True,
    ),
    # evicted because the node's local disk filled up: the disk is the cause, not the scheduler
    _s(
        "pod-evicted-disk",
        _C.STORAGE_ERROR,
        "ephemeral-storage|ephemeral local storage|diskpressure",
        # not a node's condition table with DiskPressure False: an eviction that names it
        r"low on resource: ephemeral-storage|ephemeral[- ](?:local )?storage usage .*exceeds"
        r"|evict\w*\b.*\bDiskPressure\b|\bDiskPressure\b.*\bevict",
        0.85,
        "the pod was evicted because the node's disk filled up",
    ),
    _s(
        "pod-evicted",
        _C.PREEMPTION,
        "evict|low on resource",
        r"\bpod (?:was )?evicted|The node was low on resource: (?!ephemeral-storage)"
        r"|^\s*Reason:\s+Evicted\b|\bMPIJobEvicted\b|\b\d+/\d+ workers are evicted",
        0.8,
        "the pod was evicted",
    ),
    # PaddlePaddle's allocator: posix_memalign failing with ENOMEM (12)
    _s(
        "posix-memalign-enomem",
        _C.HOST_OOM,
        "posix_memalign",
        r"posix_memalign\([^)]*\):12 != 0",
        0.8,
        "the host could not allocate memory (posix_memalign: ENOMEM)",
    ),
    # srun's report of a task the step's memory cgroup killed
    _s(
        "srun-task-oom",
        _C.HOST_OOM,
        "out of memory",
        r"srun: error: \S+: tasks? [\d,-]+: Out Of Memory",
        0.85,
        "Slurm's memory cgroup killed a task (host memory)",
    ),
    # slurmstepd's line with no "DUE TO": someone ran scancel (or the session that owned the
    # step ended), a stop from outside the job.
    _s(
        "slurm-cancelled",
        _C.PREEMPTION,
        "cancelled at",
        r"\*\*\* (?:JOB|STEP) .{0,80}CANCELLED AT \S+ \*\*\*",
        0.6,
        "the Slurm job was cancelled from outside",
    ),
    # LSF's reason for a job stopped from outside: an administrator, its run limit, a preemption,
    # its owner's bkill (TERM_MEMLIMIT, the memory limit, is the host's)
    _s(
        "lsf-term-stopped",
        _C.PREEMPTION,
        "term_",
        r"\bTERM_(?:ADMIN|RUNLIMIT|PREEMPT|OWNER|REQUEUE_ADMIN|REQUEUE_OWNER|FORCE_ADMIN|FORCE_OWNER)\b: job",
        0.85,
        "LSF stopped the job from outside (an administrator, the run limit, a preemption, bkill)",
        symptom=True,  # LSF's summary may come first in the output file, before the real cause
    ),
    # the cloud's notice to a spot/preemptible VM before it takes the machine back
    _s(
        "cloud-termination-notice",
        _C.PREEMPTION,
        "termination|interruption|power key",
        r"termination is imminent|Spot Instance (?:Termination|Interruption) Notice"
        r"|spot (?:instance )?interruption (?:notice|warning) (?:received|for)"
        # how GCP and Azure stop a VM: an ACPI power-key press the guest's systemd sees
        r"|systemd-logind(?:\[\d+\])?:? Power key pressed",
        0.85,
        "the cloud reclaimed the spot/preemptible machine",
    ),
    _s(
        "ray-node-preempted",
        _C.PREEMPTION,
        "preempted",
        # and submitit's "Caught signal SIGHUP on <host>: this job is preempted." (it requeues)
        r"node was preempted|this job is preempted|\b(?:job|cluster) (?:is|was|has been) preempted\b"
        # a scheduler's job state naming the job that took its place
        r"|\b(?:JOB_STATE_)?KILLED: Preempted by\b",
        0.85,
        "the scheduler preempted the job",
    ),
    _s(
        "torchrun-sigterm",
        _C.PREEMPTION,
        "sigterm|signal: 15|received 15 death",
        r"Received (?:Signals\.)?SIGTERM death signal|Received 15 death signal"
        r"|SignalException: Process \d+ got signal: 15",
        0.6,
        "the launcher received SIGTERM from outside",
    ),
    # a hangup: the terminal or ssh session the launcher ran in closed (run it under nohup, tmux
    # or the scheduler); a stop from outside, not a fault of the job, and it resumes
    _s(
        "torchrun-sighup",
        _C.PREEMPTION,
        "sighup|signal: 1|received 1 death",
        r"Received (?:Signals\.)?SIGHUP death signal|Received 1 death signal"
        r"|SignalException: Process \d+ got signal: 1\b",
        0.6,
        "the launcher received SIGHUP: the terminal or session it ran in closed",
    ),
    # gloo connecting its full mesh at start-up (a wrong GLOO_SOCKET_IFNAME, an unreachable peer)
    _s(
        "gloo-connect-full-mesh",
        _C.RENDEZVOUS_ERROR,
        "connectfullmesh",
        r"Gloo connectFullMesh failed",
        0.7,
        "gloo could not connect its ranks to each other at start-up",
    ),
    # an older NCCL's (before 2.3) final word on a socket connection refused: its bootstrap or its
    # ring, mostly an interface it should not use (lo, docker0), not the newer "retrying" notices
    _s(
        "nccl-socket-connect-refused",
        _C.NETWORK_ERROR,
        "call to connect timeout",
        r"NCCL WARN Call to connect timeout : Connection refused",
        0.65,
        "NCCL could not connect its ranks' sockets (an interface it should not use, a firewall)",
    ),
    # jax.distributed.initialize: the processes never all reached the coordination service
    # JAX's coordination service losing a process's heartbeats: that process or its host is gone
    # (a failure the process logged itself, when the log has it, is stronger)
    _s(
        "jax-task-heartbeat-lost",
        _C.NODE_FAILURE,
        "heartbeat",
        r"/job:\w+/replica:\d+/task:\d+ has been marked as unhealthy since its heartbeat has timed out"
        r"|The following tasks are unhealthy \(stopped sending heartbeats\)",
        0.55,
        "JAX's coordination service stopped hearing from a process (it or its host died)",
        symptom=True,
    ),
    _s(
        "jax-coordination-connect",
        _C.RENDEZVOUS_ERROR,
        "pjrt_client_connect|wait_for_all_tasks_to_register|cluster registration failed",
        r"Barrier timed out\. Barrier_id: PjRT_Client_Connect"
        # the coordination service's own registration barrier (newer jax)
        r"|Barrier timed out\. Id: \[Init\]Wait_for_all_tasks_to_register"
        r"|Stopping coordination service as cluster registration failed",
        0.85,
        "JAX's processes did not all connect to the coordination service",
    ),
    # more nodes joined than the rendezvous allows (a hot spare, a relaunched node): its settings
    _s(
        "rdzv-max-nodes-exceeded",
        _C.RENDEZVOUS_ERROR,
        "maximum number of nodes",
        r"Maximum number of nodes \(\d+\) exceeded",
        0.8,
        "more nodes joined the rendezvous than its max_nodes allows",
    ),
    _s(
        "rdzv-timeout",
        _C.RENDEZVOUS_ERROR,
        "rendezvous",
        # not torchrun's warning when a node leaves after the store's host is gone, at the end
        # of a run that completed: "... has failed to shutdown the rendezvous ... due to an
        # error of type RendezvousConnectionError"; nor its keep-alive warning (below)
        r"^(?!.*failed to (?:shut ?down the rendezvous|send a keep-alive heartbeat)).*?"
        r"(?:RendezvousTimeoutError|RendezvousConnectionError|RendezvousClosedError|rendezvous.*timed out)",
        0.9,
        "rendezvous failed",
    ),
    # torchrun's nodes send the rendezvous store keep-alives all run long: failing them mid-run
    # means the store's host (a node of the job) or the path to it is gone
    _s(
        "rdzv-keepalive-lost",
        _C.NODE_FAILURE,
        "keep-alive",
        r"has failed to send a keep-alive heartbeat to the rendezvous",
        0.6,
        "a node lost the rendezvous store mid-run: the node hosting it is gone or unreachable",
    ),
    # init_process_group's store barrier: fewer (or more) ranks joined than the world size says
    _s(
        "store-barrier-timeout",
        _C.RENDEZVOUS_ERROR,
        "store based barrier",
        r"Timed out initializing process group in store based barrier",
        0.85,
        "the ranks did not all join the process group (store barrier timed out)",
    ),
    # ... and its progress while it waits: ranks missing from the barrier, which a log that ends
    # there never saw arrive (a symptom: the barrier often completes a moment later)
    _s(
        "store-barrier-waiting",
        _C.RENDEZVOUS_ERROR,
        "store based barrier",
        r"Waiting in store based barrier to initialize process group for rank: \d+, key: \S+ "
        r"\(world_size=\d+, worker_count=\d+",
        0.5,
        "ranks were still missing from the process group's start-up barrier",
        symptom=True,
    ),
    _s(
        "rdzv-store-call",
        _C.RENDEZVOUS_ERROR,
        "c10d_rendezvous_backend",
        r"rendezvous/c10d_rendezvous_backend\.py\S*, line \d+, in _call_store",
        0.8,
        "a call to torchrun's rendezvous store failed",
    ),
    _s(
        "store-client-timeout",
        _C.RENDEZVOUS_ERROR,
        "socket",
        r"client socket has timed out after \S+ while trying to connect to"
        # (not "failed to connect to [host]:port": a warning of one retry)
        r"|client socket has failed to connect to any network address of",
        0.85,
        "could not reach the rendezvous store",
    ),
    # c10d cannot even resolve the store's host name (a MASTER_ADDR that is no host: a typo, a
    # name only another network's DNS knows); every try fails the same way
    _s(
        "store-host-unresolvable",
        _C.RENDEZVOUS_ERROR,
        "gai error|host not found",
        r"(?<!IPv6 )network addresses of \(\S+, \d+\) cannot be retrieved \(gai error: -[23] - "
        r"(?:Name or service not known|Temporary failure in name resolution|No address associated)"
        # the older TCPStore's own words (torchrun's c10d backend creating the store)
        r"|\bValueError: host not found: (?:Name or service not known|Temporary failure in name resolution)",
        0.75,
        "the rendezvous store's host name does not resolve (a wrong MASTER_ADDR or DNS)",
    ),
    # ... its IPv6 lookup alone fails on every host without an IPv6 address (localhost, an IPv4
    # literal) and c10d goes on over IPv4: a cause only where nothing else is said
    _s(
        "store-host-no-ipv6",
        _C.RENDEZVOUS_ERROR,
        "gai error",
        r"IPv6 network addresses of \(\S+, \d+\) cannot be retrieved \(gai error: -[23] - ",
        0.5,
        "the rendezvous store's host has no IPv6 address (harmless where IPv4 reaches it)",
        symptom=True,
    ),
    _s(
        "tcpstore-connect",
        _C.RENDEZVOUS_ERROR,
        "connect|diststoreerror|clients joined",
        r"connect\(\) timed out\. Original timeout|TCPStore.*Connection refused|DistStoreError"
        r"|waiting for clients\. \d+/\d+ clients joined",
        0.85,
        "could not reach the rendezvous store",
    ),
    _s(
        "store-socket-timeout",
        _C.RENDEZVOUS_ERROR,
        "socket timeout",
        # the c10d store's bare timeout (torch.distributed.elastic's store helpers): a symptom
        # at the reporting threshold, as a store also times out after a peer died of something
        # else (a SIGKILLed peer's exit line, 0.55, says more)
        r"\b(?:RuntimeError|DistNetworkError): Socket Timeout\b",
        0.5,
        "a rank timed out on the rendezvous store",
        symptom=True,
    ),
    # the launcher could not log in to the other nodes (pdsh for DeepSpeed and GPT-NeoX, mpirun):
    # the ranks never meet
    _s(
        "launcher-ssh-refused",
        _C.RENDEZVOUS_ERROR,
        "permission denied (publickey|host key verification failed",
        r"Permission denied \(publickey|^Host key verification failed\.",
        0.75,
        "the launcher could not log in to the other nodes over ssh",
    ),
    # JAX's (gRPC) client that cannot reach its coordinator at start-up
    _s(
        "grpc-coordinator-unreachable",
        _C.RENDEZVOUS_ERROR,
        "failed to connect to all addresses",
        r"UNAVAILABLE: ?failed to connect to all addresses",
        0.6,
        "the coordination client could not reach its coordinator",
    ),
    _s(
        "eaddrinuse",
        _C.RENDEZVOUS_ERROR,
        "address already in use|eaddrinuse|failed to listen|binding port|no address added|utilizing it",
        r"EADDRINUSE|errno: 98 - Address already in use|address already in use"
        r"|server socket has failed to listen on any local network address"
        # gRPC's server (JAX's coordination service, TensorFlow's) binding a port another holds,
        # or an address that is not this host's
        r"|No address added out of total \d+ resolved"
        # LightGBM's network set-up (SynapseML, Dask) on a port another job holds
        r"|Network init call failed in LightGBM with error: Binding port \d+ failed"
        # Accelerate's launcher finding the port taken before it starts the ranks
        r"|Tried to launch distributed communication on port `?\d+`?, but another process is utilizing it",
        0.9,
        "the rendezvous port could not be bound (already in use, or an address not this host's)",
    ),
    # gloo's rendezvous waits on a store for its peers' addresses (Horovod's HTTP store, torch's
    # TCPStore): "Wait timeout after 30 seconds for key(s): 0"
    _s(
        "gloo-store-wait-timeout",
        _C.RENDEZVOUS_ERROR,
        "wait timeout",
        r"Wait timeout (?:after \d+ seconds )?for key\(s\)",
        0.8,
        "the peers never published their addresses in the rendezvous store",
    ),
    _s(
        "gloo-connect-refused",
        _C.RENDEZVOUS_ERROR,
        "connection refused",
        r"gloo.*connect \[[^\]]+\]:\d+: Connection refused",
        0.75,
        "a peer refused the connection at start-up",
    ),
    _s(
        "orte-daemons-not-started",
        _C.RENDEZVOUS_ERROR,
        "unable to reliably start",
        r"ORTE was unable to reliably start one or more daemons",
        0.75,
        "mpirun could not start its daemons on the nodes (ssh, hostnames, PATH)",
    ),
    # --- communication --------------------------------------------------------------------------
    _s(
        "nccl-ib-completion",
        _C.NETWORK_ERROR,
        "got completion|completed with error|handle_error",
        # and libfabric's (AWS EFA, Slingshot): "NET/OFI Request 0x.. completed with error. RC: 113",
        # or the EFA provider's own completion-queue report of a failed transfer
        r"NET/IB\w* ?: Got completion (?:from peer \S+ )?with (?:error|status=)\s*\d+"
        r"|NET/OFI Request (?:\S+ )?completed with error"
        r"|libfabric:\S*:efa:cq:\w*handle_error\(\)\S*\s*<warn> err: \d+",
        0.9,
        "a network transfer completed with an error (InfiniBand, EFA)",
    ),
    # PaddlePaddle's parameter-server socket to a peer timing out (its glog check on the read)
    _s(
        "paddle-socket-timeout",
        _C.NETWORK_ERROR,
        "check failed: len",
        r"SocketChannel\.cpp:\d+\] Check failed: len >=? 0 +peer=\S+: Connection timed out",
        0.7,
        "a connection between the parameter servers and the trainers timed out",
    ),
    # Open MPI's TCP transport between the nodes: a peer's address it cannot route to, or an
    # inbound connection from an address it does not know (several interfaces, container
    # networks; `btl_tcp_if_include` names the one to use)
    _s(
        "openmpi-btl-tcp",
        _C.NETWORK_ERROR,
        "btl_tcp|help-mpi-btl-tcp",
        r"mca_btl_tcp_endpoint_complete_connect\] connect\(\) to \S+ failed: (?:No route to host|Connection timed out)"
        r"|help-mpi-btl-tcp\.txt / client connect fail",
        0.7,
        "Open MPI's TCP transport could not connect the nodes (an interface it should not use)",
    ),
    _s(
        "openmpi-btl-tcp-refused",
        _C.NETWORK_ERROR,
        "btl_tcp|help-mpi-btl-tcp",
        r"mca_btl_tcp_endpoint_complete_connect\] connect\(\) to \S+ failed: Connection refused"
        r"|help-mpi-btl-tcp\.txt / dropped inbound connection",
        0.6,
        "Open MPI's TCP transport was refused or dropped a connection (a peer gone, or a retried interface)",
        symptom=True,
    ),
    # the HCA itself reports the failure (a port went down, the adapter is in a fatal state)
    _s(
        "mlx5-health-failed",
        _C.NETWORK_ERROR,
        "mlx5",
        # the ConnectX driver's health poll: firmware asserted, the device stopped answering PCI
        # reads, recovery gave up; every queue pair on the adapter is gone
        r"mlx5_core\b.{0,300}?(?:health compromised|Driver is in error state|fw_fatal_reporter_err"
        r"|health recovery flow aborted|device's health compromised)",
        0.8,
        "the InfiniBand/RoCE adapter's firmware failed (mlx5 health)",
    ),
    _s(
        "nccl-ib-async-event",
        _C.NETWORK_ERROR,
        "async event",
        r"NET/IB\w* ?: Got async event ?: (?:local catastrophic error|port error|local work queue"
        r"|device fatal|port .{0,10}down)",
        0.85,
        "the InfiniBand adapter reported a fatal event to NCCL",
    ),
    # a work completion with IBV_WC_RETRY_EXC_ERR: the peer stopped acknowledging on the fabric
    _s(
        "ib-retry-exceeded",
        _C.NETWORK_ERROR,
        "retry",
        # UCX's "Transport retry count exceeded on mlx5_0:1/RoCE" too
        r"transport retry count(?:er)? exceeded|IBV_WC_RETRY_EXC_ERR",
        0.9,
        "InfiniBand transport retries exceeded",
    ),
    _s(
        "ibv-call-failed",
        _C.NETWORK_ERROR,
        "ibv_",
        # not the set-up calls that fail for the host's limits (below)
        r"Call to ibv_(?!create_qp|create_cq|reg_mr|reg_dmabuf_mr|alloc_pd)\w+ failed with error",
        0.85,
        "an InfiniBand verbs call failed",
    ),
    # verbs resources the process may not have: a queue pair or a memory registration refused
    # for the locked-memory limit (a container's `ulimit -l`) or GPUDirect RDMA's missing
    # peer-memory module (`ibv_reg_mr ... Bad address`): the node's set-up, not the fabric
    # the EFA provider refused memory for its receive buffers: the locked-memory limit
    # (`ulimit -l` in the container), not the fabric
    _s(
        "efa-memory-refused",
        _C.ENVIRONMENT_ERROR,
        "cannot allocate memory|efa internal error",
        r"Libfabric error: \(-12\) Cannot allocate memory|EFA internal error: \(4112\) Failure to post internal receive buffers",
        0.75,
        "the EFA provider could not lock memory for its buffers (the locked-memory limit)",
    ),
    _s(
        "ibv-setup-refused",
        _C.ENVIRONMENT_ERROR,
        "ibv_",
        r"Call to ibv_(?:create_qp|create_cq|reg_mr|reg_dmabuf_mr|alloc_pd)\w* failed"
        r"|\bUCX\s+ERROR\s+ibv_(?:\w+\(.*\) failed: Cannot allocate memory|(?:create_qp|create_cq|reg_mr|alloc_pd)\w*\(.*\) failed)",
        0.75,
        "the host refused InfiniBand verbs resources (locked-memory limit, no GPUDirect RDMA module)",
    ),
    # the same transport failures as UCX reports them (Open MPI's pml_ucx, NCCL's UCX plugin)
    _s(
        "rdma-transport-failed",
        _C.NETWORK_ERROR,
        "ucx",
        # UCS's own status words for a transfer that failed; not "Destination is unreachable"
        # (mostly UCX_TLS or UCX_NET_DEVICES set wrong at start-up) nor a verbs call refused for
        # the host's locked-memory limit ("Cannot allocate memory", below)
        r"\bUCX\s+ERROR\s+(?!.*Cannot allocate memory)(?:ibv_(?!create_qp|create_cq|reg_mr|alloc_pd)\w+\(.*\) failed"
        r"|.*\b(?:Connection reset by remote peer|Endpoint timeout|Input/output error))",
        0.75,
        "the RDMA transport (UCX) failed between nodes",
    ),
    _s(
        "nic-link-down",
        _C.NETWORK_ERROR,
        "link down",
        r"(?:mlx5|mlx4|ib\d|eth\d|ens\w*).*[Ll]ink down",
        0.8,
        "a network link went down",
    ),
    _s(
        "nccl-system-error",
        _C.NETWORK_ERROR,
        "system error|ncclsystemerror",
        r"unhandled system error|ncclSystemError",
        0.7,
        "NCCL system (socket/transport) error",
    ),
    # NCCL cannot load the NVIDIA management or driver library it needs (its `Last error:`)
    _s(
        "nccl-driver-lib-missing",
        _C.ENVIRONMENT_ERROR,
        "failed to open lib",
        r"Failed to open lib(?:nvidia-ml|cuda)\.so",
        0.8,
        "NCCL could not open the NVIDIA driver's libraries (NVML or libcuda) on this machine",
    ),
    _s(
        "nccl-remote-error",
        _C.NETWORK_ERROR,
        "remote process exited",
        r"remote process exited or there was a network error",
        # NCCL's own words say it cannot tell a dead peer from a failed network: below the
        # threshold alone, a best guess; a transport line beside it (NET/IB, OFI) decides
        0.45,
        "NCCL lost a remote peer",
        symptom=True,
    ),
    _s(
        "peer-reset",
        _C.NETWORK_ERROR,
        "by peer|by remote peer",
        r"Connection (?:reset|closed) by (?:remote )?peer",
        0.6,
        "a peer closed the connection",
        symptom=True,
    ),
    # aws-ofi-nccl finding no libfabric provider (no EFA device in the container, a wrong plugin)
    _s(
        "ofi-no-provider",
        _C.ENVIRONMENT_ERROR,
        "fi_getinfo|unable to find a protocol|fabric provider|initoficomponents",
        r"NET/OFI .{0,40}fi_getinfo\(\) call failed|NET/OFI Unable to find a protocol that worked"
        r"|NET/OFI Couldn't open a fabric provider|NET/OFI OFI plugin initOfiComponents\(\) failed",
        0.7,
        "NCCL's OFI plugin found no usable libfabric provider (EFA devices not visible?)",
        symptom=True,  # NCCL then falls back to its socket transport: the job may go on
    ),
    # the plugin could not register the GPU's memory with the NIC (no GPUDirect RDMA on this node
    # or in this container): no fallback, the communicator fails
    _s(
        "ofi-register-refused",
        _C.ENVIRONMENT_ERROR,
        "unable to register memory",
        r"NET/OFI Unable to register memory \(type = \d+\) for device",
        0.7,
        "NCCL's OFI plugin could not register GPU memory with the NIC (GPUDirect RDMA not available)",
    ),
    # Ascend's forms of a collective that waited past HCCL's timeout: the device's event or notify
    # wait (EI0002, the runtime's 507011/507048 after it); a peer that never came, like NCCL's
    _s(
        "ascend-wait-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "during task execution|notify register times out",
        # the event wait's and the HCCL fftsplus task's forms
        r"timeout occurred during task execution|The wait execution of the Notify register times out",
        0.8,
        "an Ascend collective waited past HCCL's timeout for a peer",
        symptom=True,
    ),
    # Ascend's form of a watchdog timeout
    _s(
        "ascend-stream-sync-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "stream synchronize timeout",
        r"Stream synchronize timeout",
        0.75,
        "an Ascend NPU stream waited past its timeout (a collective or a peer that never came)",
        symptom=True,
    ),
    # DeepEP's expert-parallel dispatch or combine (an all-to-all over NVLink and RDMA) waited
    # past its timeout for tokens a peer never sent: like a watchdog's, a symptom of that peer
    _s(
        "deepep-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "deepep error:",
        # the internode dispatch's and the intranode wait's words
        r"DeepEP error: (?:timeout \((?:dispatch|combine)|CPU recv timeout)",
        0.75,
        "an expert-parallel all-to-all (DeepEP dispatch or combine) waited past its timeout for a peer",
        symptom=True,
    ),
    _s(
        "nccl-unique-id-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "nccluniqueid",
        r"retr(?:ie|ei)ving ncclUniqueId from \[\d+\] via c10d key-value store .{0,80}got error",
        0.7,
        "a rank waited for the NCCL id its peer never published in time (that peer busy or dead)",
        symptom=True,
    ),
    # the c10d store's own socket wait, timed out: a rank waiting for a key its peer never wrote
    # (the NCCL id at a group's first collective, a barrier through the store), the peer busy or
    # dead; printed before the error that carries it, which a log may not reach
    _s(
        "store-wait-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "waitforinput",
        # not the store-based barrier's own 10 s polls, which a slow rank's peers print and go on
        r"\[c10d\] waitForInput: socket\b.*?\btimed out after (?:[6-9]\d{4}|\d{6,}) ?ms",
        0.65,
        "a rank's wait on the job's store timed out (its peer never wrote what it waited for)",
        symptom=True,
    ),
    # Horovod's stall inspector: some ranks never submitted a tensor the others wait to reduce;
    # a symptom, as every timeout (a rank 0 saving for a minute makes it warn, and goes on); its
    # "Stalled ranks:" list, a rank a line (`6!:` when it is about to shut the job down)
    # ... except its `N!:` list lines: Horovod shuts the job down for them
    _s(
        "horovod-stall-shutdown",
        _C.COLLECTIVE_TIMEOUT,
        "[horovod",
        r"^\d+!: \[horovod",
        0.85,
        "Horovod's stall inspector shut the job down for ranks missing from a collective",
    ),
    _s(
        "horovod-stall",
        _C.COLLECTIVE_TIMEOUT,
        "subset of ranks|missing ranks|[horovod",
        r"submitted to be reduced, gathered or broadcasted by subset of ranks|\[missing ranks: \d"
        r"|^\d+: \[horovod",
        0.8,
        "Horovod's stall inspector: ranks missing from a collective",
        symptom=True,
    ),
    _s(
        "nccl-socket-failed",
        _C.NETWORK_ERROR,
        "nccl warn|net : call to",
        r"NCCL WARN (?:socket\w*|Socket recv failed|Net : Connection closed|(?:Net : )?Connect to \S+ failed"
        r"|Net : Call to (?:recv|send|connect) .*failed|NET/Socket : socket progress error)"
        r"|^\s*Net : Call to (?:recv|send|connect) .*failed",
        0.6,
        "NCCL socket failure",
        symptom=True,
    ),
    # `triage run`'s own line in an attempt's log where it stopped the attempt: read later, what
    # it stopped it for (the SIGTERMs after it are its own)
    _s(
        "triage-stopped-hung",
        _C.COLLECTIVE_TIMEOUT,
        "[triage] stopping",
        r"^\[triage\] stopping the attempt: (?:hang|collective_stall)\b",
        0.6,
        "Triage stopped the attempt as hung",
    ),
    _s(
        "triage-stopped-nonfinite",
        _C.NUMERICAL_INSTABILITY,
        "[triage] stopping",
        r"^\[triage\] stopping the attempt: nonfinite_loss\b",
        0.8,
        "Triage stopped the attempt: its loss stayed NaN/Inf",
    ),
    _s(
        "nccl-watchdog-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "watchdog caught",
        r"Watchdog caught collective operation timeout",
        0.85,
        "NCCL watchdog timed out a collective",
        symptom=True,
    ),
    # a watchdog timeout set shorter than any collective takes: the job's configuration, whatever
    # the collective was waiting for (the defaults are 10 and 30 minutes)
    _s(
        "collective-timeout-misconfigured",
        _C.USER_CODE_ERROR,
        "timeout(ms)=",
        r"Watchdog caught collective operation timeout: .*Timeout\(ms\)=(?:\d{1,3}|[1-4]\d{3})\)",
        0.9,
        "the collective timeout is set to under 5 seconds (a configuration error)",
    ),
    _s(
        "nccl-timeout-at-work",
        _C.COLLECTIVE_TIMEOUT,
        "timeout|timed out",
        # not a WorkNCCL descriptor alone: "Collective WorkNCCL(..., Timeout(ms)=600000) raised
        # the following async exception: NCCL error: remote process exited" is no timeout
        r"Timeout at NCCL work|Some NCCL operations have failed or timed out"
        r"|Timeout\(ms\)=\d+\) ran for \d+ milliseconds before timing out"
        r"|Caught collective operation timeout",
        0.8,
        "NCCL collective timed out",
        symptom=True,
    ),
    _s(
        "watchdog-stuck",
        _C.COLLECTIVE_TIMEOUT,
        "heartbeat|watchdog",
        r"Heartbeat monitor timed out|watchdog (?:thread )?(?:got )?stuck",
        0.75,
        "the NCCL watchdog itself hung",
        symptom=True,
    ),
    _s(
        "gloo-op-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "timed out waiting",
        r"gloo.*Timed out waiting \d+ms for (?:recv|send) operation to complete"
        r"|Timed out waiting \d+ms for (?:recv|send) operation to complete",
        0.8,
        "a gloo collective timed out",
        symptom=True,
    ),
    _s(
        "dist-timeout",
        _C.COLLECTIVE_TIMEOUT,
        "timed out",
        r"(?:barrier|all_?reduce|all_?gather|broadcast|monitoredBarrier).*timed out",
        0.7,
        "a collective timed out",
        symptom=True,
    ),
    # --- framework -------------------------------------------------------------------------------
    _s(
        "checkpoint-error",
        _C.CHECKPOINT_ERROR,
        "checkpoint|ckpt|global_step|_states|storage has wrong size",
        r"(?<!utils\.checkpoint\.)CheckpointError|checkpoint_error: |Error\(s\) in loading state_dict"
        r"|Missing key\(s\) in state_dict"
        r"|Unexpected key\(s\) in state_dict"
        # a resume whose checkpoint directory lacks a file (an incomplete save, a conversion
        # that left out DeepSpeed's optimizer shards)
        r"|No such file or directory: '[^']*(?:checkpoint[^']*/[^'/]+|/[^'/]*checkpoint[^'/]*\.(?:pt|pth|tar|bin|ckpt|safetensors|pkl|h5)|/global_step\d+/[^'/]+"
        r"|_(?:optim|model)_states\.pt)'"
        # DeepSpeed ZeRO resumed on another data-parallel size than it was saved with
        r"|checkpoint being loaded used a DP world size of \d+ but the current world size is \d+"
        # torch.load of a legacy-format file cut short (a save killed half-way)
        r"|storage has wrong size: expected -?\d+ got",
        0.8,
        "a checkpoint could not be written or read back",
    ),
    # activation checkpointing's recompute differs from the forward pass (a module that is not
    # deterministic under recompute, ZeRO-3's gathered parameters freed in between): the model
    # code's, and no model checkpoint's
    _s(
        "activation-recompute-mismatch",
        _C.USER_CODE_ERROR,
        "utils.checkpoint",
        r"torch\.utils\.checkpoint\.CheckpointError|torch\.utils\.checkpoint: Recomputed values for the following "
        r"tensors have different metadata",
        0.85,
        "activation checkpointing recomputed different tensors than the forward pass",
    ),
    # a DCP load of a directory without its `.metadata` (a save that never finished, a wrong path)
    _s(
        "dcp-metadata-missing",
        _C.CHECKPOINT_ERROR,
        "assert metadata is not none",
        r"\bassert metadata is not None\b",
        0.7,
        "a distributed checkpoint was loaded without its metadata (an unfinished save, a wrong path)",
    ),
    # safetensors failing to write a checkpoint file (Windows' mapped-file lock, a permission)
    _s(
        "safetensors-write-failed",
        _C.CHECKPOINT_ERROR,
        "while serializing",
        # (not the disk's own: EIO, ENOSPC, EROFS, a lost mount, a stale handle, a quota; nor ENOMEM)
        r"SafetensorError: Error while serializing: IoError\(Os \{ code: (?!(?:5|12|28|30|107|116|122)\b)\d+",
        0.75,
        "a safetensors checkpoint could not be written",
    ),
    # a native crash inside torch.save's zip writer: the save was under way when it died
    _s(
        "crash-in-checkpoint-writer",
        _C.CHECKPOINT_ERROR,
        "pytorchstreamwriter",
        r"\bin caffe2::serialize::PyTorchStreamWriter::\w+",
        0.65,
        "the process crashed inside torch.save's writer",
    ),
    # a CUDA call's error raised through c10's check, its message cut from the log
    _s(
        "c10-cuda-check",
        _C.CUDA_ERROR,
        "c10_cuda_check_implementation",
        r"^Exception raised from c10_cuda_check_implementation\b",
        0.6,
        "a CUDA runtime call failed (its message is not in the log)",
    ),
    # PyTorch 2.9+ refusing a TF32 setting made through both its legacy flags and its new API
    _s(
        "tf32-mixed-apis",
        _C.USER_CODE_ERROR,
        "legacy and new apis",
        r"you have used mix of the legacy and new APIs to set the TF32 status",
        0.8,
        "the code set TF32 through both the legacy flags and the new API",
    ),
    # TPU runtimes: a libtpu that lacks a function the framework calls (versions that do not fit),
    # and a program the TPU compiler cannot fit (too many parameters for one computation)
    _s(
        "tpu-library-mismatch",
        _C.ENVIRONMENT_ERROR,
        "not available in this library",
        r"tpu_executor_init_fns\.inc:\d+\] \w+ not available in this library",
        0.85,
        "the TPU library does not fit the framework (a function it needs is missing)",
    ),
    _s(
        "tpu-computation-too-many-parameters",
        _C.USER_CODE_ERROR,
        "computation requires more parameters",
        r"Computation requires more parameters \(\d+\) than supported \(limit \d+\)",
        0.8,
        "the model's computation needs more parameters than the TPU compiler supports",
    ),
    _s(
        "illegal-memory-access",
        _C.CUDA_ERROR,
        "illegal memory access|cuda exception",
        # and cuda-gdb's report of the faulting warp
        r"an illegal memory access was encountered|CUDA Exception: Warp (?:Out-of-range|Misaligned|Illegal) Address",
        0.8,
        "CUDA illegal memory access",
    ),
    _s(
        "illegal-instruction",
        _C.CUDA_ERROR,
        "illegal instruction",
        r"an illegal instruction was encountered",
        0.8,
        "CUDA illegal instruction",
    ),
    _s(
        "misaligned-address",
        _C.CUDA_ERROR,
        "misaligned address",
        r"misaligned address",
        0.75,
        "CUDA misaligned address",
    ),
    _s(
        "launch-failure",
        _C.CUDA_ERROR,
        "launch failure|hiperrorlaunchfailure",
        r"unspecified launch failure|hipErrorLaunchFailure",
        0.8,
        "CUDA unspecified launch failure",
    ),
    _s(
        "cublas-exec-failed",
        _C.CUDA_ERROR,
        "status_execution_failed|cublas error|kernel execution error",
        r"CUBLAS_STATUS_EXECUTION_FAILED|CUDNN_STATUS_EXECUTION_FAILED"
        r"|cuBLAS Error: the function failed to launch on the GPU"
        # DeepSpeed's cuBLAS wrappers print the status (13: execution failed; 3: alloc failed)
        r"|^!!!! kernel execution error\.(?!.*\berror: (?!13\b)\d+)",
        0.75,
        "cuBLAS/cuDNN kernel execution failed",
    ),
    _s(
        "cudnn-internal",
        _C.CUDA_ERROR,
        "cudnn_status",
        r"CUDNN_STATUS_INTERNAL_ERROR",
        0.6,
        "cuDNN internal error",
    ),
    _s(
        "cuda-unknown-error",
        _C.CUDA_ERROR,
        "cuda error",
        r"CUDA error: (?:unknown error|an? \w+ error was encountered)",
        0.55,
        "CUDA error",
    ),
    # a kernel the driver's watchdog killed for running too long (a GPU that also drives a
    # display, or a kernel that never ends): CUDA's fault, not the hardware's
    _s(
        "launch-timeout",
        _C.CUDA_ERROR,
        "launch_timeout|launch timed out|launchtimeout",
        r"CUDA_ERROR_LAUNCH_TIMEOUT|the launch timed out and was terminated|cudaErrorLaunchTimeout",
        0.75,
        "a kernel ran past the driver's watchdog limit and was killed",
    ),
    _s(
        "cuda-error-other",
        _C.CUDA_ERROR,
        "cuda error|hip error",
        # CUDA's (and HIP's) runtime error of a kind no stronger form names: the taxonomy's
        # default for a runtime fault; kept weak, so any named cause in the log wins
        r"\b(?:CUDA|HIP) error: (?!out of memory|device-side assert|no kernel image|invalid device (?:ordinal|function)"
        r"|(?:all|no) CUDA-capable|CUDA driver version|driver shutting down|context is destroyed)[a-z]",
        0.5,
        "CUDA runtime error",
    ),
    _s(
        "rocm-memory-fault",
        _C.CUDA_ERROR,
        "memory access fault by gpu|hw exception by gpu|hsa_status_error",
        # ROCm's forms of an illegal memory access and of a kernel that never finished
        r"Memory access fault by GPU node-\d+|HW Exception by GPU node-\d+.*reason\s*:\s*GPU Hang"
        r"|HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION|HSA_STATUS_ERROR_EXCEPTION",
        0.7,
        "the GPU faulted on a memory access or hung in a kernel (ROCm)",
    ),
    # Ascend's forms of a kernel that faulted or never finished on the NPU (ACL 507014/507015,
    # 507034/507035): what CUDA's illegal access and launch timeout are on a GPU
    # Ascend's device memory exhausted: the runtime's malloc failing for want of memory (EL0004,
    # MindSpore's MallocDeviceMemory), what CUDA's out of memory is on a GPU
    _s(
        "ascend-device-oom",
        _C.GPU_OOM,
        "driver error:out of memory|el0004|malloc device memory failed|call rtmalloc fail|heap_alloc_managed out of memory"
        "|out of memory!!!",
        # EL0004 with or without `[PID: N] <time>` before its text, and CANN 8's named form
        # `Memory_Allocation_Failure(EL0004)`; GE's own `Call rtMalloc fail`
        r"rtMalloc execute failed, reason=\[driver error:out of memory\]|EL0004\b.{0,80}?Failed to allocate memory"
        r"|Malloc device memory failed\b|Call rtMalloc fail\b"
        # the driver's own allocator, and MindSpore's memory pool
        r"|heap_alloc_managed out of memory|Out of Memory!!! total\[\d+\]",
        0.85,
        "the Ascend NPU's memory is exhausted (a device allocation failed)",
    ),
    # MindSpore's silent-corruption check (SilentCheck) found a feature value out of bounds on an
    # Ascend device. Any inf/NaN trips it (a model's own fp16 overflow too) and training goes on
    # by default, so a symptom: it decides only a log where nothing else failed
    _s(
        "mindspore-silent-check",
        _C.SILENT_DATA_CORRUPTION,
        "silentcheck",
        r"SilentCheckV\d+ Compute\w*Error|\[ERROR\].*silent_check\w*\.cc.*SilentCheck",
        0.55,
        "the framework's silent-corruption check found a feature value out of bounds",
        symptom=True,
    ),
    # Ascend's GetNext (the input queue's AI CPU operator) timing out: the host side never fed
    # the device's data queue in time
    _s(
        "ascend-getnext-timeout",
        _C.DATA_PIPELINE_ERROR,
        "aicpu_getnext",
        r"fault op_name=aicpu_getnext\w*",
        0.75,
        "the device waited past its timeout for the input pipeline (Ascend's GetNext)",
    ),
    # HCCL's RoCE completion error (EI0013): what NCCL's IB `Got completion with error` is
    _s(
        "hccl-roce-cqe",
        _C.NETWORK_ERROR,
        "roce cqe|ei0013",
        r"ROCE CQE\(EI0013\)|EI0013\b.{0,80}error CQE",
        0.7,
        "HCCL's RoCE transport failed (an error completion): the link or the peer went away",
        symptom=True,
    ),
    # PyTorch's own check (TORCH_DISTRIBUTED_DEBUG=DETAIL) that the ranks call the same
    # collective: a desync in the training code, as `analyzers/hang.py` finds from heartbeats
    _s(
        "collective-mismatch",
        _C.USER_CODE_ERROR,
        "mismatch between collectives|collective mismatch",
        # gloo's own check on a message whose size does not fit the op it arrived for
        r"Detected mismatch between collectives on ranks"
        r"|Received data size doesn't match expected size\. Is there a distributed collective mismatch",
        0.85,
        "the ranks called different collectives at one point (a desync in the training code)",
    ),
    # Accelerate's debug mode checking a collective's inputs first: the ranks gave it tensors
    # of different shapes (a collective that would otherwise hang or corrupt)
    _s(
        "accelerate-shape-mismatch",
        _C.USER_CODE_ERROR,
        "shape mismatches",
        r"Cannot apply desired operation due to shape mismatches",
        0.8,
        "the ranks gave a collective tensors of different shapes (Accelerate's debug check)",
    ),
    # a collective handed tensors it cannot take (a view that is not contiguous, a CPU tensor to
    # NCCL): the training code's call
    _s(
        "collective-tensor-args",
        _C.USER_CODE_ERROR,
        "tensors must be",
        r"\bTensors must be (?:contiguous|(?:CUDA|NPU) and dense)\b",
        0.8,
        "a collective was given tensors it cannot take (not contiguous, or not on the device)",
    ),
    # HCCL refusing a collective's data type (bool and byte all-reduce on Ascend): the call is
    # the training code's to change
    _s(
        "hccl-unsupported-dtype",
        _C.USER_CODE_ERROR,
        "unsupported data type",
        r"HCCL \w+(?: & \w+)?: Unsupported data type",
        0.8,
        "HCCL does not support the tensor's data type for this collective",
    ),
    _s(
        "ascend-core-fault",
        _C.CUDA_ERROR,
        "core execution|core timeout|core exception|error code:50703|error code: 50703|error code:50701|error code: 50701",
        r"(?:Vector|AI) ?Core execution (?:timed out|exception)|\[(?:vector core|aicore|ai core) (?:timeout|exception)\]"
        r"|error code: ?5070(?:14|15|34|35)\b",
        0.7,
        "a kernel faulted or timed out on the Ascend NPU's AI/vector cores",
    ),
    # Cray MPICH refusing to start on how it was built or set: GPU-aware MPI asked for without its
    # GPU transport layer linked in, a NIC policy the ranks' CPU binding cannot satisfy
    _s(
        "cray-mpich-setup",
        _C.ENVIRONMENT_ERROR,
        "gtl library|nic_policy|ofi invalid value",
        r"GPU_SUPPORT_ENABLED is requested, but GTL library is not linked|Unable to use a NIC_POLICY of"
        r"|OFI invalid value for environment variable",
        0.85,
        "Cray MPICH cannot start as set up (GPU support without GTL linked, or an unusable NIC policy)",
    ),
    # Slurm could not start the step's program: it is not on the PATH the step sees (a module or
    # container that lacks it, a virtualenv not activated in the batch script)
    _s(
        "slurm-execve",
        _C.ENVIRONMENT_ERROR,
        "execve",
        r"slurmstepd(?:-\S+)?: error: execve\(\): .+: (?:No such file or directory|Permission denied)",
        0.8,
        "Slurm could not start the step's program (not found or not executable where it ran)",
    ),
    _s(
        "no-kernel-image",
        _C.ENVIRONMENT_ERROR,
        "no kernel image",
        r"no kernel image is available for execution",
        0.9,
        "the binaries do not support this GPU architecture",
    ),
    # a kernel image the driver will not load: Triton's or the runtime's code built by a ptxas or
    # CUDA newer than the driver (cudaErrorInvalidKernelImage)
    _s(
        "invalid-kernel-image",
        _C.ENVIRONMENT_ERROR,
        "kernel image is invalid",
        r"(?:Triton Error \[CUDA\]|CUDA error|CUDA driver error): device kernel image is invalid",
        0.75,
        "a compiled kernel does not fit the driver (a ptxas or CUDA newer than the driver)",
    ),
    # a symbol the binary looks for is not in the driver or the GPU's code (NCCL or a kernel
    # built for another architecture or CUDA version: a new GPU generation under an old image)
    _s(
        "named-symbol-not-found",
        _C.ENVIRONMENT_ERROR,
        "named symbol not found",
        r"named symbol not found|cudaErrorSymbolNotFound",
        0.7,
        "a symbol the binaries need is missing on this GPU or driver (built for another architecture or CUDA)",
    ),
    # Triton builds a small C module against the CUDA driver at its first use: no compiler, no
    # headers or no libcuda where the job runs
    _s(
        "triton-no-c-compiler",
        _C.ENVIRONMENT_ERROR,
        "failed to find c compiler",
        r"Failed to find C compiler",
        0.75,
        "Triton finds no C compiler to build its CUDA driver module",
    ),
    # ... its traceback through the build: a symptom (torch.compile may log one it swallowed and
    # go on in eager mode), which the job's own error outranks
    _s(
        "triton-driver-build",
        _C.ENVIRONMENT_ERROR,
        "compile_module_from_src",
        r"\bin compile_module_from_src\b",
        0.55,
        "Triton could not build its CUDA driver module (no C compiler, headers or libcuda here)",
        symptom=True,
    ),
    # the runtime compiler (NVRTC: TorchInductor, cupy, custom kernels) does not know this GPU's
    # architecture: a CUDA older than the GPU
    _s(
        "nvrtc-unknown-arch",
        _C.ENVIRONMENT_ERROR,
        "gpu-architecture",
        r"nvrtc: error: invalid value for --gpu-architecture",
        0.8,
        "the CUDA runtime compiler does not know this GPU's architecture (a CUDA older than the GPU)",
    ),
    # Open MPI's daemons reading each other's messages wrong: different Open MPI (or hwloc)
    # builds on the nodes of one job
    _s(
        "orte-unpack-past-end",
        _C.ENVIRONMENT_ERROR,
        "data unpack would read past end|unpack_read_past_end",
        # at start-up; not in `show_help.c`, where it is the relay of another process's error
        # message failing after a rank died
        r"Data unpack would read past end of buffer(?! in file util/show_help\.c)"
        r"|PMIX_ERR_UNPACK_READ_PAST_END_OF_BUFFER in file base/plm_base_launch_support\.c",
        0.7,
        "Open MPI's processes do not understand each other (different Open MPI or hwloc builds on the nodes)",
    ),
    # ... and its "out of resources" (and the older runtime's PI_ERROR_): most often device
    # memory, also a single buffer past the device's per-allocation limit
    _s(
        "intel-gpu-out-of-resources",
        _C.GPU_OOM,
        "out_of_resources",
        r"\b(?:UR_RESULT|PI)_ERROR_OUT_OF_RESOURCES\b",
        0.7,
        "the Intel GPU ran out of resources (device memory, or one buffer past its size limit)",
    ),
    # GPUs that cannot reach each other's memory directly (consumer cards, a VM's passthrough,
    # an IOMMU in the way) while NCCL was told or chose to use peer-to-peer: NCCL_P2P_DISABLE=1
    # NCCL found no network it can use (a NET plugin that fails to load, IB disabled on a stack
    # that has nothing else): the job's environment, whatever error the call then returns
    _s(
        "nccl-no-net-plugin",
        _C.ENVIRONMENT_ERROR,
        "failed to initialize any net plugin",
        r"Failed to initialize any NET plugin",
        0.8,
        "NCCL could initialize no network plugin (the NCCL build, its plugins or NCCL_* settings)",
    ),
    # DTensor refusing a plain tensor in an op with DTensors: the parallelized model's code
    _s(
        "dtensor-mixed-tensor",
        _C.USER_CODE_ERROR,
        "mixed torch.tensor and dtensor",
        r"got mixed torch\.Tensor and DTensor, need to convert all torch\.Tensor to DTensor",
        0.8,
        "a plain tensor met DTensors in one operation (the parallelized model's code)",
    ),
    _s(
        "p2p-not-supported",
        _C.ENVIRONMENT_ERROR,
        "peer access is not supported",
        r"Cuda failure (?:217 )?'peer access is not supported between these two devices'"
        r"|cudaErrorPeerAccessUnsupported",
        0.8,
        "the GPUs cannot access each other's memory peer to peer (disable NCCL's P2P on such machines)",
    ),
    _s(
        "invalid-device-function",
        _C.ENVIRONMENT_ERROR,
        "invalid device function|nobinaryforgpu",
        # CUDA's and HIP's word for a kernel with no code for this GPU's architecture (an
        # extension or a ROCm build for another gfx target)
        r"(?:CUDA|HIP) (?:runtime )?error: invalid device function|Cuda failure 'invalid device function'"
        r"|hipErrorNoBinaryForGpu"
        # an extension's own print of the runtime's error (mmcv's `error in
        # ms_deformable_im2col_cuda: invalid device function`)
        r"|^\s*error in \w+: invalid device function",
        0.75,
        "a kernel has no code for this GPU's architecture",
    ),
    _s(
        "cuda-capability",
        _C.ENVIRONMENT_ERROR,
        "not compatible",
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch",
        0.85,
        "PyTorch was not built for this GPU architecture",
    ),
    # the stack and the GPU do not fit: a feature the GPU's architecture lacks, or libraries
    # built against other CUDA, cuDNN or NumPy versions than the ones installed
    _s(
        "stack-does-not-fit",
        _C.ENVIRONMENT_ERROR,
        "only support|doesn't support bf16|compiled with different cuda|mismatches the version|required for fp8"
        "|not supported on rocm"
        "|cudnn version incompatibility|loaded runtime cudnn|dtype size changed|ninja is required|cuda_home",
        r"FlashAttention only supports? (?:Ampere|Turing|Hopper)\b.*GPUs? or newer"
        r"|(?:Bfloat16|bf16) is only supported on GPUs with compute capability"
        # TransformerEngine's FP8 on a GPU without FP8 (before Ada/Hopper)
        # (raised: a test's skip reason prints the same words on a GPU that has none)
        r"|(?-i:[A-Z]\w*(?:Error|Exception)): Device compute capability [\d.]+ or higher required for FP8"
        # an operation with no ROCm implementation (a grouped GEMM on MI300X)
        r"|(?-i:[A-Z]\w*(?:Error|Exception)): (?!.*\b(?:fall(?:s|ing)? ?back|skipp)).*\bis not supported on ROCm\b"
        r"|Your setup doesn't support bf16"
        r"|compiled with different CUDA (?:major )?versions"
        r"|The detected CUDA version \([\d.]+\) mismatches the version that was used to compile PyTorch"
        r"|cuDNN version incompatibility|Loaded runtime CuDNN library: [\d.]+ but source was compiled with"
        r"|ValueError: numpy\.dtype size changed, may indicate binary incompatibility"
        r"|Ninja is required to load C\+\+ extensions"
        r"|CUDA_HOME environment variable is not set",
        0.8,
        "the software stack does not fit this GPU or its other libraries",
    ),
    # NumPy 2 under a module built for NumPy 1: fatal where the import fails, only a warning
    # where torch catches it ("Failed to initialize NumPy"), so the failure's own line decides
    # the error a module built for NumPy 1.x raises when it meets NumPy 2
    _s(
        "numpy-abi-error",
        _C.ENVIRONMENT_ERROR,
        "_array_api not found",
        r"(?:AttributeError|ImportError): _ARRAY_API not found",
        0.8,
        "a module built for NumPy 1.x cannot load under NumPy 2",
        # printed before the ImportError, which an optional import catches and goes on
        symptom=True,
    ),
    # protobuf 4+ without the API an older generated module (TensorFlow's, ONNX's) calls
    _s(
        "protobuf-api-mismatch",
        _C.ENVIRONMENT_ERROR,
        "getprototype",
        r"'MessageFactory' object has no attribute 'GetPrototype'",
        0.75,
        "protobuf is newer than a module built against it",
    ),
    _s(
        "numpy-abi-warning",
        _C.ENVIRONMENT_ERROR,
        "numpy 1.x",
        r"compiled using NumPy 1\.x cannot be run in\b",
        0.6,
        "a module built for NumPy 1.x met NumPy 2",
        symptom=True,
    ),
    # a kernel's compiled configuration needs more on-chip memory than this GPU has; a C/CUDA
    # build the toolchain could not finish (an extension built at first use, Inductor's gcc)
    _s(
        "build-toolchain-failed",
        _C.ENVIRONMENT_ERROR,
        "outofresources|nvcc|calledprocesserror|error building extension|cannot find -l|no such file or directory",
        # the exception itself, not Inductor's autotuner logging a config it then skips
        r"^(?:[\w.]+\.)?OutOfResources: out of resource: shared memory"
        r"|error: command '\S*nvcc' failed with exit (?:code|status)"
        # torch's JIT extension build (DeepSpeed's ops, Apex) and what stops it: a header or a
        # library the build environment lacks
        r"|Error building extension '[\w.-]+'|\bld: cannot find -l\w+"
        r"|fatal error: [\w/.-]+\.h: No such file or directory"
        # Inductor's and an extension's compiler or build run (the line under `BackendCompilerFailed`)
        r"|CalledProcessError: Command '\['(?:\S*/)?(?:gcc|g\+\+|cc|c\+\+|clang\+*|nvcc|hipcc|ninja)'",
        0.65,
        "a kernel or extension could not be built for this machine",
    ),
    # the GPU stack cannot be reached from the job: the driver not loaded or not answering, NVML
    # unusable in a container, the container runtime without its GPU hook, a driver older than the
    # container's CUDA, Windows unable to load torch's DLLs
    _s(
        "gpu-stack-unreachable",
        _C.ENVIRONMENT_ERROR,
        "couldn't communicate with the nvidia driver|failed to initialize nvml: unknown|could not select device driver"
        "|nvidia-container-cli|winerror 126|cuda driver initialization failed",
        r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
        r"|Failed to initialize NVML: Unknown Error"
        r"|could not select device driver \"\" with capabilities: \[\[gpu\]\]"
        r"|nvidia-container-cli: (?:initialization|requirement) error"
        r"|\[WinError 126\] The specified module could not be found"
        r"|CUDA driver initialization failed, you might not have a CUDA gpu",
        0.8,
        "the job cannot reach the GPU stack on this machine (driver, NVML, container runtime)",
    ),
    # NCCL cannot set itself up on this machine: no network interface it may use (a wrong
    # NCCL_SOCKET_IFNAME) or no plugin for the network it is told to use
    _s(
        "nccl-setup-env",
        _C.ENVIRONMENT_ERROR,
        "no socket interface|no usable listening interface|error: network",
        # also as PyTorch re-raises it after "Last error:"
        r"(?:NCCL WARN )?Bootstrap : no socket interface found|NET/Socket : No usable listening interface found"
        # NCCL_NET names a network whose plugin is not installed
        r"|NCCL WARN Error: network .+ not found",
        0.75,
        "NCCL found no network interface or network plugin it can use on this machine",
    ),
    # the job's container could not start on the node (pyxis/enroot under Slurm): the node's
    # container runtime lacks what it needs (NVIDIA's container CLI, a hook)
    _s(
        "container-start-failed",
        _C.ENVIRONMENT_ERROR,
        "pyxis|nvidia-container-cli",
        r"pyxis: couldn't start container|pyxis: container start failed"
        r"|Command not found: nvidia-container-cli",
        0.8,
        "the job's container could not start on the node",
    ),
    # NCCL cannot build its topology of this machine: a version too old for the GPUs and
    # switches (no reverse path between two PCI nodes), or 2.25's bug placing the network
    _s(
        "nccl-topology-unknown",
        _C.ENVIRONMENT_ERROR,
        "could not find net|find reverse path|could not find real path",
        r"NCCL WARN Could not find NET with id \d+|Failed to find reverse path from remNode"
        # a container whose /sys does not show the GPU's PCI path
        r"|NCCL WARN Could not find real path of /sys/",
        0.7,
        "NCCL could not build its topology of this machine (a version that does not know it)",
    ),
    _s(
        "driver-insufficient",
        _C.ENVIRONMENT_ERROR,
        "driver",
        r"CUDA driver version is insufficient|NVIDIA driver on your system is too old"
        r"|Driver/library version mismatch|Found no NVIDIA driver"
        # a CUDA call the installed driver is too old for (NCCL's `Cuda failure`, the runtime's)
        r"|API call is not supported in the installed CUDA driver",
        0.9,
        "the NVIDIA driver does not fit the CUDA runtime",
    ),
    # JAX's CUDA backend that cannot start on this machine: no GPU visible to it, a cuDNN older
    # than it was built against, its DNN library failing at start-up
    # XLA's NCCL calls on a machine whose NCCL library it cannot load
    # a warning JAX falls back to the CPU on, and a DNN start-up failure that is often GPU memory
    # another process took: weak, a raised error is stronger
    _s(
        "jax-cuda-backend-warning",
        _C.ENVIRONMENT_ERROR,
        "cuda backend failed to initialize|dnn library initialization failed",
        r"CUDA backend failed to initialize|DNN library initialization failed",
        0.55,
        "JAX's CUDA backend could not start (a cuDNN older than it was built for, or memory taken)",
        symptom=True,
    ),
    _s(
        "xla-nccl-not-loaded",
        _C.ENVIRONMENT_ERROR,
        "unable to load nccl",
        r"Unable to load NCCL library\. Multi-GPU collectives will not work",
        0.8,
        "the NCCL library could not be loaded (multi-GPU collectives cannot run)",
    ),
    # a torch built without what the launch asks of it (Windows wheels and libuv's TCPStore), a
    # GPU/driver without CUDA multicast for TransformerEngine's comm+GEMM overlap
    _s(
        "stack-lacks-feature",
        _C.ENVIRONMENT_ERROR,
        "libuv|multicast|operation not supported",
        r"use_libuv was requested but PyTorch was build? without libuv support"
        r"|does not support comm\+GEMM overlap with CUDA Multicast"
        r"|userbuffers\S*:\d+ in function create_communicator\w*: CUDA Error: operation not supported",
        0.8,
        "this torch, driver or GPU lacks a feature the launch asks for (libuv, CUDA multicast)",
    ),
    _s(
        "jax-cuda-backend-failed",
        _C.ENVIRONMENT_ERROR,
        "initialize backend 'cuda'|cuda backend failed to initialize|dnn library initialization failed",
        # raised, not JAX's informational "Unable to initialize backend" on every CPU/TPU host
        r"RuntimeError: Unable to initialize backend 'cuda'",
        0.75,
        "JAX's CUDA backend could not start (no visible GPU, a cuDNN older than it was built for)",
    ),
    _s(
        "no-cuda-device",
        _C.ENVIRONMENT_ERROR,
        "cuda|hiperror|rocm-capable|ptx|no gpus found",
        r"no CUDA-capable device is detected|Torch not compiled with CUDA enabled"
        r"|Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) is False"
        r"|No CUDA GPUs are available|ProcessGroupNCCL is only supported with GPUs, no GPUs found"
        # a device held by another process (exclusive compute mode), ROCm's missing device or
        # driver, a driver too old for the toolkit's PTX or its forward compatibility
        r"|CUDA-capable device\(s\) is/are busy or unavailable|all CUDA-capable devices are busy"
        r"|hipErrorNoDevice|no ROCm-capable device|hipErrorInsufficientDriver"
        r"|unsupported display driver / cuda driver combination"
        r"|forward compatibility was attempted on non supported HW"
        r"|PTX was compiled with an unsupported toolchain|PTX JIT compiler library not found",
        0.75,
        "no usable CUDA device in this environment",
    ),
    _s(
        "built-without-cuda",
        _C.ENVIRONMENT_ERROR,
        "without cuda|without gpu|not compiled with",
        # in an error or a fatal log line (k2's `[F] ... k2 compiled without CUDA support`), not
        # a note that an optional extension is missing
        r"(?:\[F\]|\w*(?:Error|Exception)\b|(?<!non-)\bfatal\b).*?\b(?:compiled|built) without (?:CUDA|GPU)\b"
        # torch_scatter's, torchvision's and detectron2's ops, XGBoost
        r"|\bnot compiled with (?:CUDA|GPU) support\b",
        0.75,
        "a library was built without the GPU support the job uses",
    ),
    _s(
        "backend-not-built",
        _C.ENVIRONMENT_ERROR,
        "built in|nccl is not available|no backend type",
        r"Distributed package doesn't have (?:NCCL|MPI|Gloo|UCC)(?: \" \"| )built in|\w+ is not built into this (?:torch|PyTorch)"
        # CuPy built without NCCL (ChainerMN's communicators need it)
        r"|NCCL is not available\. Please confirm that NCCL is enabled in CuPy"
        # a collective on a device no loaded backend serves (Intel's oneCCL bindings not
        # imported for XPU, a Gaudi or NPU plugin missing)
        r"|No backend type associated with device type (?:xpu|hpu|npu|mtia|mps|privateuseone)\b",
        0.9,
        "this PyTorch build lacks the distributed backend the job asks for",
    ),
    # a rank asking CUDA for a GPU index it cannot see: the launch's GPU mapping
    _s(
        "invalid-device-ordinal",
        _C.USER_CODE_ERROR,
        "invalid device ordinal|device < num_gpus",
        r"(?:CUDA error|RuntimeError|cudaErrorInvalidDevice)\W.{0,40}invalid device ordinal"
        r"|Cuda failure (?:\d+ )?'invalid device ordinal'"  # NCCL's form
        # torch's lazy initialisation on a device index past the GPUs it sees
        r"|device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",
        0.8,
        "a rank asked for a GPU index it cannot see (the launch's GPU mapping, e.g. --gpus-per-task)",
    ),
    # PaddlePaddle's error for a library it needs (not its glog warning for an optional one)
    _s(
        "paddle-dynamic-library",
        _C.ENVIRONMENT_ERROR,
        "paddle depends on",
        r"(?:Error: |\(PreconditionNotMet\) )The third-party dynamic library \(\S+\) that Paddle depends on"
        r" is not configured correctly",
        0.85,
        "a library PaddlePaddle needs (libnccl, libcudnn) is not found",
    ),
    # the Ascend CANN toolkit's own error code for a module it cannot import
    _s(
        "cann-python-module",
        _C.ENVIRONMENT_ERROR,
        "failed to import python module",
        r"Failed to import Python module \[ModuleNotFoundError",
        0.85,
        "the Ascend CANN toolkit misses a Python module (an incomplete or mismatched install)",
    ),
    # ColossalAI's ZeRO finding parameters whose gradients never came (unused in the step)
    _s(
        "colossalai-grad-sync",
        _C.USER_CODE_ERROR,
        "zero ddp error",
        r"ZERO DDP error: the synchronization of gradients",
        0.75,
        "ColossalAI's ZeRO could not reduce some parameters' gradients (parameters unused in the step)",
    ),
    # DeepSpeed's JIT op builder against a CUDA toolkit other than torch's
    _s(
        "ds-op-builder-cuda-mismatch",
        _C.ENVIRONMENT_ERROR,
        "does not match the version torch",
        # not its warning that it goes on anyway ("... but since the APIs are compatible,
        # accepting this combination", DS_SKIP_CUDA_CHECK)
        r"Installed CUDA version \S+ does not match the version torch was compiled with"
        r"(?!.*(?:APIs are compatible|DS_SKIP_CUDA_CHECK|Allowing this combination))",
        0.9,
        "the CUDA toolkit does not match the one PyTorch was built with",
    ),
    # bitsandbytes' own diagnosis of its CUDA set-up
    _s(
        "bnb-cuda-setup",
        _C.ENVIRONMENT_ERROR,
        "cuda setup",
        r"CUDA SETUP: Problem:|CUDA Setup failed despite GPU being available",
        0.85,
        "bitsandbytes could not set up its CUDA library",
    ),
    _s(
        "missing-shared-lib",
        _C.ENVIRONMENT_ERROR,
        "cannot open shared object|.so",
        r"(?:ImportError|OSError|error while loading shared libraries).*"
        r"(?:cannot open shared object file|\.so(?:\.\d+)*: (?:cannot read file data|file too short"
        r"|invalid ELF header|wrong ELF class))"
        # an error that is only the loader's message ("Error reported to Coordinator: libnccl.so.2:
        # cannot open ..."), not a warning that a library is optional (torchvision's image
        # extension, TensorFlow's "Could not load dynamic library ... dlerror: ...")
        r"|(?:\bError(?: reported to \w+)?|\bException):\s*lib[\w+-]*\.so(?:\.\d+)*: cannot open shared object file"
        # the loader's message alone on its line, as an extension's loader prints it before the
        # import that then fails
        r"|^lib[\w+-]*\.so(?:\.\d+)*: cannot open shared object file",
        0.85,
        "a shared library is missing or unreadable",
    ),
    # a custom operator library (torchvision, fbgemm_gpu, an extension) that did not load into this
    # torch: built for another torch or CUDA, or its own libraries missing
    _s(
        "custom-op-not-loaded",
        _C.ENVIRONMENT_ERROR,
        "no such operator|_opnamespace",
        r"No such operator [a-z_]\w*::\w+|'_OpNamespace' '\w+' object has no attribute",
        0.75,
        "a compiled operator library did not load into this torch (built for another version)",
    ),
    _s(
        "undefined-symbol",
        _C.ENVIRONMENT_ERROR,
        "undefined symbol",
        r"undefined symbol: \w+",
        0.8,
        "binary/library version mismatch (undefined symbol)",
    ),
    _s(
        "glibcxx",
        _C.ENVIRONMENT_ERROR,
        "not found",
        r"^(?!.*libibverbs: Warning: couldn't load driver).*GLIBC\w*_[\d.]+' not found",
        0.8,
        "the C/C++ runtime is too old",
    ),
    _s(
        "module-not-found",
        _C.ENVIRONMENT_ERROR,
        "modulenotfounderror|no module named",
        # and the interpreter's own refusal of `python -m pkg` (a build step's `-m pybind11`)
        r"ModuleNotFoundError: No module named|^\S*python[\d.]*: No module named \S",
        0.7,
        "a Python package is missing",
    ),
    # a library's module without a name the code asks of it: the name came or went between
    # versions (NumPy 1.24's `np.float`, an API a newer release added), so what is installed
    # does not fit the code; not the script's own modules, whose names are its own business
    _s(
        "library-attribute-missing",
        _C.ENVIRONMENT_ERROR,
        "has no attribute",
        r"AttributeError[^\w:]{0,3}:\s*\W{0,2}module '(?:"
        r"torch|numpy|transformers|deepspeed|accelerate|peft|trl|megatron|apex|transformer_engine|modelopt"
        r"|jax|jaxlib|flax|optax|tensorflow|keras|scipy|pandas|PIL|cv2|huggingface_hub|lightning"
        r"|pytorch_lightning|torchvision|torchaudio|triton|bitsandbytes|xformers|flash_attn|vllm|nemo"
        r"|ray|wandb|mmcv|mmengine|timm|diffusers|tokenizers|sklearn|numba|google\.protobuf"
        r"|pkg_resources|collections|distutils"
        r")(?:\.[\w.]+)?' has no attribute '\w+'"
        # two OpenCV packages installed over each other import each other's half
        r"|AttributeError: partially initialized module 'cv2' has no attribute",
        0.72,
        "the installed library lacks a name the code uses (a version that does not fit)",
    ),
    _s(
        "import-error",
        _C.ENVIRONMENT_ERROR,
        "importerror|failed to import",
        # an import the installed packages cannot satisfy (a missing optional dependency, a
        # name a version does not have); not a circular import of the script's own modules
        r"^(?:[\w.]+\.)?ImportError: (?!.*(?:partially initialized module|sys\.meta_path is None"
        r"|attempted relative import))\S"
        # Transformers' lazy import, re-raised as a RuntimeError naming the module it could not load
        r"|RuntimeError: Failed to import [\w.]+ because of the following error",
        0.55,
        "a Python import failed (a missing or mismatched package)",
    ),
    _s(
        "built-for-other-versions",
        _C.ENVIRONMENT_ERROR,
        "version mismatch|no operator found for",
        # Ray's workers against another cluster version (its patch-version difference is only
        # a warning); xFormers without a kernel for the job's torch or GPU
        r"(?<!patch )Version mismatch: The cluster was started with"
        r"|No operator found for `memory_efficient_attention",
        0.75,
        "a component was built for or started with other versions than the job's",
    ),
    _s(
        "xformers-built-for",
        _C.ENVIRONMENT_ERROR,
        "was built for",
        # a warning: xFormers falls back and the run may go on; the evidence when nothing else is
        r"can't load C\+\+/CUDA extensions\. \w+ was built for",
        0.6,
        "xFormers was built for another torch or CUDA",
        symptom=True,
    ),
    # torch.distributed.checkpoint's planner: a saved tensor whose shape the current model or
    # optimizer does not have (another parallel layout, vocabulary or model size)
    # t5x's restore: a checkpoint of another model size in the model directory
    _s(
        "t5x-checkpoint-shape",
        _C.CHECKPOINT_ERROR,
        "in checkpoint",
        r"Shape of `[^`]+` in checkpoint \([\d, ]*\) does not match expected",
        0.85,
        "a checkpoint's tensor does not fit the current model (its shape differs)",
    ),
    # a framework's own refusal of the run's configuration (OLMo's OLMoConfigurationError, a
    # ConfigError): the run's settings, on every run
    _s(
        "configuration-error",
        _C.USER_CODE_ERROR,
        "configurationerror|configerror",
        r"^(?:[\w.]+\.)?\w*(?:Configuration|Config)Error: \S",
        0.75,
        "the framework refused the run's configuration",
    ),
    # DeepSpeed reads a --deepspeed_config path it cannot find as a base64-encoded config: the
    # path is missing on that node
    _s(
        "deepspeed-config-not-found",
        _C.USER_CODE_ERROR,
        "incorrect padding",
        r"binascii\.Error: Incorrect padding",
        # any bad base64 raises it (a dataset's image field too): weak
        0.5,
        "the DeepSpeed config was not found (a path missing on this node, read as base64)",
    ),
    # an argument parser refusing the launch's arguments: the command line, on every run
    _s(
        "argparse-refused",
        _C.USER_CODE_ERROR,
        ": error: ",
        r"^\S+: error: (?:argument \S+: |unrecognized arguments: |the following arguments are required: )",
        0.7,
        "the script refused its command-line arguments",
    ),
    _s(
        "dcp-size-mismatch",
        _C.CHECKPOINT_ERROR,
        "size mismatch between saved",
        r"Size mismatch between saved torch\.Size\(\[[\d, ]*\]\) and current: torch\.Size",
        0.85,
        "a distributed checkpoint's tensor does not fit the current model (its shape differs)",
    ),
    _s(
        "state-dict-load",
        _C.CHECKPOINT_ERROR,
        "state_dict|parameter group",
        r"Error\(s\) in loading state_dict|(?:Missing|Unexpected) key\(s\) in state_dict"
        r"|Missing key in checkpoint state_dict"
        # an optimizer's saved state for other parameters (torch.optim's own refusals)
        r"|loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
        r"|loaded state dict has a different number of parameter groups",
        0.85,
        "the checkpoint does not match the model (state_dict keys)",
    ),
    # Ray Tune: the checkpoint a trial reported is not on this node after the sync meant to bring it
    _s(
        "tune-checkpoint-not-synced",
        _C.CHECKPOINT_ERROR,
        "sync down",
        r"Checkpoint path .* not found after successful sync down",
        0.75,
        "the trial's checkpoint was not there after the sync that should have copied it",
    ),
    _s(
        "unable-to-load-from-checkpoint",
        _C.CHECKPOINT_ERROR,
        "unable to load",
        # Megatron-derived trainers: the optimizer, RNG or model state is not in the checkpoint
        r"Unable to load (?:the )?(?:optimizer|model|rng state|random state|scheduler|iteration)\w* from checkpoint"
        # Transformers: a weights file it cannot read (an interrupted download, a truncated save)
        r"|Unable to load weights from pytorch checkpoint file",
        0.8,
        "a state the resume needs is missing from the checkpoint",
    ),
    _s(
        "orbax-tmp-collision",
        _C.CHECKPOINT_ERROR,
        "orbax-checkpoint-tmp",
        r"\bFileExistsError\b.*\.orbax-checkpoint-tmp(?:-\d+)?\b",
        0.8,
        "an Orbax checkpoint's temporary directory already exists (an interrupted earlier save)",
    ),
    # safetensors refuses tied weights (Accelerate's save_state, Trainer's save): nothing written
    _s(
        "safetensors-shared-tensors",
        _C.CHECKPOINT_ERROR,
        "tensors share memory|shared tensors",
        r"Some tensors share memory, this will lead to duplicate memory on disk"
        # transformers' save_pretrained on tied weights its config does not declare
        r"|The weights trying to be saved contained shared tensors",
        0.85,
        "the checkpoint could not be written: safetensors refuses tensors that share memory",
    ),
    _s(
        "tf-key-not-in-checkpoint",
        _C.CHECKPOINT_ERROR,
        "not found in checkpoint",
        # TF's own forms: after NotFoundError, or alone on a line above its RestoreV2 node; not
        # a loader's warning that skips a key ("Key optimizer not found in checkpoint state, ...")
        r"(?-i:NotFoundError\b.*\bKey \S+ not found in checkpoint|^\s*Key \S+ not found in checkpoint\s*$"
        # the restore op's own warning, one per missing variable, before the error it raises
        r"|[\]:] Not found: Key \S+ not found in checkpoint)",
        0.85,
        "the checkpoint does not match the model (a variable not found in it)",
    ),
    _s(
        "state-dict-size-mismatch",
        _C.CHECKPOINT_ERROR,
        "copying a param",
        r"size mismatch for \S+: copying a param with shape",
        0.85,
        "the checkpoint does not match the model (shapes)",
    ),
    _s(
        "set-tensor-shape-mismatch",
        _C.CHECKPOINT_ERROR,
        "trying to set a tensor",
        r"Trying to set a tensor of shape .* this looks? incorrect",
        0.85,
        "the checkpoint does not match the model (shapes)",
    ),
    # torch.load / pickle.load of an empty or truncated file (a checkpoint written short, or
    # read while it was being written)
    _s(
        "load-ran-out-of-input",
        _C.CHECKPOINT_ERROR,
        "ran out of input",
        r"^\s*EOFError: Ran out of input",
        0.6,
        "a checkpoint (or pickle) file ended early: empty or truncated",
    ),
    _s(
        "zip-reader-failed",
        _C.CHECKPOINT_ERROR,
        "pytorchstreamreader",
        r"PytorchStreamReader failed",
        0.85,
        "the checkpoint file is truncated or corrupt",
    ),
    _s(
        "zip-writer-failed",
        _C.CHECKPOINT_ERROR,
        "pytorchstreamwriter",
        r"PytorchStreamWriter failed writing",
        0.7,
        "the checkpoint could not be written",
    ),
    # torch.save's zip writer: the file could not be created, or the archive ended short of what
    # was written (`unexpected pos N vs M`, a full or failing disk, said as the checkpoint's fault
    # from the log alone; the analysis names the disk where the agent saw it full:
    # analyzers/disk_space.py).
    _s(
        "zip-writer-open-failed",
        _C.CHECKPOINT_ERROR,
        "cannot be opened",
        r"^RuntimeError: File \S.* cannot be opened\.",
        0.75,
        "the checkpoint file could not be opened for writing",
    ),
    _s(
        "zip-writer-unexpected-pos",
        _C.CHECKPOINT_ERROR,
        "unexpected pos",
        r"inline_container\.cc:\d+\] ?\. ?unexpected pos \d+ vs \d+",
        0.75,
        "the checkpoint archive was written short",
    ),
    _s(
        "lightning-weights-only-resume",
        _C.CHECKPOINT_ERROR,
        "contains only the model",
        r"Trying to restore \w+ state but checkpoint contains only the model",
        0.85,
        "resumed from a weights-only checkpoint (no optimizer/trainer state)",
    ),
    # a shared-memory block Python's multiprocessing named (`/psm_...`) gone before a loader's
    # consumer opened it: the data pipeline's workers (Grain's, a DataLoader's) lost their batch
    _s(
        "loader-shm-block-gone",
        _C.DATA_PIPELINE_ERROR,
        "/psm_",
        # (not CPython's resource_tracker warning at exit, `'/psm_..': [Errno 2] No such file`)
        r"FileNotFoundError: \[Errno 2\] No such file or directory: '/psm_[0-9a-f]+'",
        0.8,
        "a data loader's shared-memory batch was gone before it was read",
    ),
    # the Hugging Face Hub refusing or timing out a dataset's files while a job streams or lists
    # them (huggingface_hub's retry warning: the job may still go on, so it decides only alone)
    _s(
        "hub-dataset-request-failed",
        _C.DATA_PIPELINE_ERROR,
        "thrown while requesting",
        r"(?:HTTP Error (?:429|5\d\d)|'.{0,400}?(?:timed out|Connection).{0,400}?') thrown while requesting(?:\s*$| (?:GET|HEAD) "
        r"(?:https://huggingface\.co/(?:api/)?datasets/|\.\.\./))",
        0.55,
        "the Hugging Face Hub refused or timed out a dataset request (rate limit, a stalled read)",
        symptom=True,
    ),
    # numpy reading a dataset's index file that is no array (Megatron's index cache written by
    # another node at the same time, or cut short): the data's, not a checkpoint's
    _s(
        "dataset-index-unreadable",
        _C.DATA_PIPELINE_ERROR,
        "as a pickle|no such file or directory",
        r"Failed to interpret file '[^']*(?:/index-cache/|_(?:doc|sample|shuffle)_idx\.npy)[^']*' as a pickle"
        # and missing: a node built the cache another node reads (no shared file system), or
        # read it while another still wrote it
        r"|No such file or directory: '[^']*(?:/index-cache/[^']*\.npy|_(?:doc|sample|shuffle)_idx\.npy)'",
        0.8,
        "a dataset index file could not be read (missing on this node, built twice at once, or cut short)",
    ),
    _s(
        "unpickling",
        _C.CHECKPOINT_ERROR,
        "unpickling|weights only",
        # not the `raise pickle.UnpicklingError(` a traceback shows as the source of its frame
        r"(?<!raise pickle\.)(?<!raise )UnpicklingError|Weights only load failed",
        0.7,
        "the checkpoint could not be unpickled",
    ),
    # mmcv's registry re-raises an error while building an object under the class's name: a
    # dataset's annotation file that cannot be unpickled is the data's
    _s(
        "dataset-annotations-unpickling",
        _C.DATA_PIPELINE_ERROR,
        "unpickling|ran out of input",
        r"(?:UnpicklingError|EOFError): \w*Dataset\w*: (?:pickle data was truncated|Ran out of input)",
        0.8,
        "the dataset's annotation file is truncated or corrupt",
    ),
    _s(
        "safetensors-header",
        _C.CHECKPOINT_ERROR,
        "safetensor",
        r"SafetensorError: Error while deserializing",
        0.8,
        "the safetensors file is corrupt",
    ),
    _s(
        "dcp-exception",
        _C.CHECKPOINT_ERROR,
        "checkpointexception|checkpointingexception",
        r"Checkpoint(?:ing)?Exception",
        0.8,
        "distributed checkpoint save/load failed",
    ),
    # a distributed-checkpoint load fails while planning which saved entries each rank reads:
    # the model or optimizer asks for a key (or shape) the checkpoint does not hold
    _s(
        "dcp-load-plan",
        _C.CHECKPOINT_ERROR,
        "load_plan|state_dict_metadata",
        r"\bin create_default_local_load_plan\b|state_dict_metadata\[fqn\]",
        0.8,
        "the distributed checkpoint lacks an entry the model or optimizer asks for",
    ),
    _s(
        "hf-tmp-checkpoint-rename",
        _C.CHECKPOINT_ERROR,
        "tmp-checkpoint",
        r"(?:Directory not empty|File exists): '[^']*tmp-checkpoint-",
        0.85,
        "the checkpoint's temporary directory could not be renamed into place (ranks raced)",
    ),
    _s(
        "file-maybe-corrupted",
        _C.CHECKPOINT_ERROR,
        "corrupted",
        r"The file might be corrupted",
        0.8,
        "the checkpoint file is truncated or corrupt",
    ),
    # --- application -------------------------------------------------------------------------------
    _s(
        "cuda-oom",
        _C.GPU_OOM,
        "out of memory|outofmemory|memoryallocation|pt_devmem|cumemallocasync failed|out_of_device",
        r"CUDA out of memory|(?<!Ray)OutOfMemoryError(?!: \w+ was killed due to the node)|\b(?:CUDA|HIP) error: out of memory"
        r"|hipErrorOutOfMemory|cudaErrorMemoryAllocation|MODULE:PT_DEVMEM Allocation failed"
        r"|Cuda failure (?:\d+ )?'out of memory'|\b(?:HIP|NPU|XPU|MPS)(?: backend)? out of memory"
        # an allocator of the job's own calling the runtime (torch_memory_saver's `cudaError
        # error: 2 (out of memory)`)
        r"|\bcudaError(?: error)?: 2 \(out of memory\)"
        r"|Out of memory error on GPU \d+\. Cannot allocate"  # PaddlePaddle's ResourceExhaustedError
        # Intel GPUs' Level Zero runtime (Unified Runtime's codes)
        r"|\bUR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\b|\bZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\b"
        # XLA's asynchronous allocator, its size printed with thousands separators
        r"|cuMemAllocAsync failed to allocate [\d,]+ bytes"
        r"|\bcuMemAlloc failed: out of memory"  # PyCUDA's driver wrapper
        # CuPy's memory pool (Chainer, CuPy-based trainers)
        r"|\bout of memory to allocate \d+ bytes \(total \d+ bytes\)",
        0.95,
        "the GPU ran out of memory",
    ),
    # fairseq catching an OOM and skipping the batch: the job goes on, one rank short of a
    # batch (and, in DDP, liable to fall out of step with its peers)
    _s(
        "oom-batch-skipped",
        _C.GPU_OOM,
        "ran out of memory|recover from oom",
        r"attempting to recover from OOM in forward/backward pass|\bran out of memory(?: on GPU #\d+)?, skipping batch",
        0.55,
        "the GPU ran out of memory on a batch, which was skipped",
    ),
    # the caching allocator's expandable segments unable to map more device memory: a warning
    # (it frees its cache and tries again), weaker than an error that ends the job
    _s(
        "expandable-segments-oom",
        _C.GPU_OOM,
        "expandable_segments",
        r"expandable_segments: memory mapping failed with OOM on device",
        0.55,
        "the GPU's memory ran out (the allocator could not map more)",
        symptom=True,
    ),
    # GPU allocators of other stacks refusing: XGBoost's caching allocator, PhysX's (Isaac Gym)
    _s(
        "gpu-allocator-refused",
        _C.GPU_OOM,
        "memory allocation error|fail to allocate memory",
        r"Memory allocation error on worker \d+: Caching allocator"
        r"|PxgCudaDeviceMemoryAllocator fail to allocate memory \d+ bytes",
        0.85,
        "the GPU's memory ran out (a library's own allocator refused)",
    ),
    # TensorFlow's stream executor failing an allocation: it may retry smaller and go on, so weak
    _s(
        "tf-device-alloc-failed",
        _C.GPU_OOM,
        "failed to allocate",
        r"failed to allocate \S+ \(\d+ bytes\) from device: CUDA_ERROR_OUT_OF_MEMORY",
        0.55,
        "TensorFlow could not allocate GPU memory",
    ),
    _s(
        "tf-oom-allocating-cpu",
        _C.HOST_OOM,
        "oom when allocating",
        r"\bOOM when allocating tensor\b.*device:CPU",
        0.75,
        "TensorFlow ran out of host memory allocating a tensor",
    ),
    # TensorFlow's allocator refusing a tensor on a GPU (on the CPU it is the host's memory)
    _s(
        "tf-oom-allocating",
        _C.GPU_OOM,
        "oom when allocating",
        r"\bOOM when allocating tensor\b(?!.*device:CPU)",
        0.9,
        "TensorFlow ran out of GPU memory allocating a tensor",
    ),
    # NCCL failing to allocate: after a CUDA error it names on the line before (`Cuda failure
    # 'out of memory'`, or another), or, alone, on a GPU whose memory is taken: a symptom, which
    # that line outranks
    _s(
        "nccl-cuda-alloc-failed",
        _C.GPU_OOM,
        "failed to cuda",
        r"Failed to CUDA (?:calloc|malloc)(?: async)? \d+ bytes",
        0.55,
        "NCCL could not allocate GPU memory (the GPU's memory is taken, or a CUDA error before it)",
        symptom=True,
    ),
    # XLA (JAX, torch_xla) on a GPU or TPU: the device's memory
    _s(
        "xla-resource-exhausted",
        _C.GPU_OOM,
        "resource_exhausted",
        r"RESOURCE_EXHAUSTED: Out of memory (?:while trying to allocate|allocating)",
        0.85,
        "XLA ran out of device memory",
    ),
    _s(
        "xla-hbm-exhausted",
        _C.GPU_OOM,
        "memory space hbm|hbm capacity",
        r"Ran out of memory in memory space hbm|Exceeded hbm capacity",
        0.9,
        "the accelerator's HBM is too small for the compiled program",
    ),
    _s(
        "accelerator-memory-too-small",
        _C.GPU_OOM,
        "peak hbm|synhelper|cache blocks|gpu memory utilization|kv cache|runtime error: out of memory",
        # Neuron's compiler, Gaudi's graph workspace, vLLM's KV cache in an RL trainer's rollout
        # engine: each the device memory running out in its own words
        r"Estimated peak HBM usage \([\d.]+\) exceeds \d+GB"
        r"|Runtime error: out of memory \S+\.(?:hpp|cuh?|cpp):\d+"
        r"|MODULE:SYNHELPER workspace Allocation of size ::?\d+ failed"
        r"|No available memory for the cache blocks|is less than desired GPU memory utilization"
        r"|larger than the maximum number of tokens that can be stored in KV cache"
        r"|KV cache is needed, which is larger than the available KV cache memory",
        0.85,
        "the accelerator's memory is too small for the program (compiler, graph workspace or KV cache)",
    ),
    _s(
        "cublas-alloc-failed",
        _C.GPU_OOM,
        "alloc_failed|kernel execution error",
        r"CUBLAS_STATUS_ALLOC_FAILED|^!!!! kernel execution error\..*\berror: 3\b",
        0.7,
        "cuBLAS could not allocate GPU memory",
    ),
    # MindFormers' health monitor: the global gradient norm over its threshold, step after step
    _s(
        "global-norm-over-threshold",
        _C.NUMERICAL_INSTABILITY,
        "consecutive times greater than threshold",
        r"global norm \[?[\d.eE+-]+\]? of step \d+ has been \d+ consecutive times greater than threshold",
        0.8,
        "the gradient norm stayed above its threshold (a gradient explosion)",
    ),
    # the HF Trainer's DebugUnderflowOverflow (--debug underflow_overflow) stopping the run at the
    # first inf/nan in a module's activations or weights
    _s(
        "hf-debug-inf-nan",
        _C.NUMERICAL_INSTABILITY,
        "detected inf/nan",
        r"Detected inf/nan during batch_number=\d+",
        0.85,
        "an inf or NaN appeared in the activations (the HF debug tracer stopped the run)",
    ),
    # torch.distributions handed a NaN parameter (a policy's or a VAE's outputs went non-finite)
    _s(
        "distribution-invalid-values",
        _C.NUMERICAL_INSTABILITY,
        "invalid values",
        # Real() is what a NaN breaks; GreaterThan or Simplex are more often a missing softplus or
        # logits passed as probabilities (the code's)
        r"Expected parameter \w+ .{0,200}to satisfy the constraint (?:Independent\w*\()?Real\(\).{0,40}, but found invalid values",
        0.75,
        "a distribution's parameters became NaN (the model's outputs went non-finite)",
    ),
    # icefall's AMP check: the grad scale fell to nothing (it saves a "bad-model" and exits)
    _s(
        "grad-scale-collapsed",
        _C.NUMERICAL_INSTABILITY,
        "grad scale|grad_scale",
        r"Grad scale is small: \d(?:\.\d+)?e-(?:0[6-9]|[1-9]\d)\b|grad_scale is too small, exiting",
        0.8,
        "the fp16 grad scale collapsed: every step overflows",
    ),
    _s(
        "loss-scale-minimum",
        _C.NUMERICAL_INSTABILITY,
        "loss scale|loss_scale",
        r"Current loss scale already at minimum|Attempted loss scale: 1(?:\.0)?, reducing to 1\b"
        # apex's older scaler halving a scale already below 1 (every step overflows)
        r"|reducing loss scale to (?:0(?:\.\d+)?|\d(?:\.\d+)?e-\d+)\s*$"
        r"|minimum loss scale reached"
        # a dynamic loss scale that fell below 1 (fairseq "setting loss scale to: 0.00048",
        # "loss_scale 0" in its metric lines): every step overflows
        r"|setting loss scale to:? 0(?:\.\d+)?\b|\bloss_scale[ =:]+0(?:\.0+)?(?=[ ,|]|$)"
        # guided-diffusion's log2 of the scale (it starts at 20) gone below -10: thirty NaN
        # steps and more in a row
        r"|Found NaN, decreased lg_loss_scale to -(?:\d{3,}|[1-9]\d)(?:\.\d+)?\b",
        0.85,
        "fp16 loss scale collapsed: every step overflows",
    ),
    # Dynamic loss scaling starts at 2**16 or so and settles within a few halvings; one still
    # halving at 8 or below has overflowed a dozen times over: the gradients overflow fp16
    # nearly every step (DeepSpeed's and Apex's "Reducing dynamic loss scale from 8.0 to 4.0")
    _s(
        "loss-scale-tiny",
        _C.NUMERICAL_INSTABILITY,
        "loss scale",
        r"Reducing dynamic loss scale from [2-8](?:\.0+)? to [1-4](?:\.0+)?\b"
        r"|Attempted loss scale: (?:[2-8]|0)(?:\.0+)?, reducing to [0-4](?:\.0+)?\b",
        0.7,
        "fp16 loss scale halved down to single digits: the gradients overflow nearly every step",
    ),
    # Python's own exception for float trouble: fairseq raises it for NaN/Inf gradients and a
    # collapsed loss scale, numpy under seterr(all="raise") for overflow and invalid values. Not
    # fairseq's "gradients are inconsistent between workers": replicas that disagree.
    # torch.normal handed a NaN standard deviation (a policy's log-std went non-finite)
    _s(
        "normal-std-nonfinite",
        _C.NUMERICAL_INSTABILITY,
        "normal expects",
        r"normal expects all elements of std >= 0\.0",
        # a NaN std, or a negative one the code computed: weak
        0.55,
        "a sampled distribution's standard deviation became NaN (the model's outputs went non-finite)",
    ),
    # TensorFlow's check_numerics and its summary writer meeting a NaN
    # detectron2's own checks that training diverged
    _s(
        "detectron2-diverged",
        _C.NUMERICAL_INSTABILITY,
        "infinite or nan",
        r"Box regression deltas become infinite or NaN",
        0.85,
        "training diverged: box regression deltas became Inf/NaN",
    ),
    _s(
        "tf-nan-check",
        _C.NUMERICAL_INSTABILITY,
        "nan in summary|had nan values|had inf values|had inf and nan",
        r"Nan in summary histogram for|\bTensor had (?:Inf and NaN|NaN|Inf) values",
        0.8,
        "a tensor became NaN or Inf (TensorFlow's numeric check)",
    ),
    _s(
        "floating-point-error",
        _C.NUMERICAL_INSTABILITY,
        "floatingpointerror",
        r"\bFloatingPointError\b(?!.*inconsistent between workers)",
        0.85,
        "a FloatingPointError: NaN/Inf values in the loss or gradients",
    ),
    _s(
        "overflow-skipped-iterations",
        _C.NUMERICAL_INSTABILITY,
        "due to overflow",
        r"Skipped \d+ iterations in a row due to Overflow",
        0.85,
        "fp16 overflow on every step: the training skipped iteration after iteration",
    ),
    # fairseq's "grad_norm across the workers:" table, every rank's norm NaN/Inf
    _s(
        "grad-norm-per-rank-nonfinite",
        _C.NUMERICAL_INSTABILITY,
        "nan|inf",
        r"^\s*rank\s+\d+ = [-+]?(?:nan|inf)\s*$",
        0.8,
        "a rank's gradient norm is NaN/Inf",
    ),
    _s(
        "grad-norm-nonfinite",
        _C.NUMERICAL_INSTABILITY,
        "non-finite|gradients at all steps",
        r"total norm of order \S+ for gradients from `?parameters`? is non-finite"
        # ESPnet2's stop: "The gradients at all steps are invalid in this epoch"
        r"|gradients at all steps are invalid",
        0.85,
        "clip_grad_norm_(error_if_nonfinite=True): the gradient norm is NaN/Inf",
    ),
    _s(
        "grad-norm-words-nonfinite",
        _C.NUMERICAL_INSTABILITY,
        "grad norm|gradient norm",
        # ESPnet's trainers skip a step in words ("grad norm is nan. Do not update model"); with
        # AMP the same line comes while the loss scale settles, so it is weak: a named failure
        # later in the log wins
        r"\bgrad(?:ient)? norm (?:is|was|became) (?:nan|inf)\b",
        0.55,
        "the gradient norm became NaN/Inf",
    ),
    _s(
        "metric-input-nonfinite",
        _C.NUMERICAL_INSTABILITY,
        "contains nan|contains infinity",
        # scikit-learn's metrics on a model's outputs: the outputs went NaN or Inf (not its
        # "Input X contains NaN": the input data)
        r"\bInput (?:y_pred |y_score |y_prob )?contains (?:NaN|infinity)",
        0.7,
        "the model's outputs became NaN or Inf (a metric refused them)",
    ),
    _s(
        "loss-is-nan",
        _C.NUMERICAL_INSTABILITY,
        # an infinite loss carries no "nan": its printed forms (`train_loss=inf`, `loss: -inf`)
        "nan|=inf|= inf|=-inf|= -inf|=+inf|:inf|: inf|:-inf|: -inf|: +inf|'inf|loss inf|loss -inf|loss +inf",
        # a hyphenated name too (VideoChat's `video-loss: nan`)
        r"loss (?:is|became|=) ?nan|\bnan loss\b|(?<![\w-])(?:[a-z]\w*-)?\w*loss\w*'?\s*[:=]\s*'?[-+]?nan\b"
        # not the starting value of a best-so-far or a loss scale (`best_val_loss: inf`)
        r"|(?<![\w-])(?!\w*(?:best|min|max|lowest|prev|init|scale|threshold))\w*loss\w*'?\s*[:=]\s*'?[-+]?inf\b"
        r"|(?<![\w-])(?:train |val |valid )?loss\s+[-+]?(?:nan|inf)\b(?!\s*(?:loss|is|was|when|in|at|after)\b)"
        r"|grad[_ ]norm'?\s*[:=]\s*'?nan\b|found NaN in|returned nan values|NaN or Inf found"
        r"|detected inf or nan"
        # a pipeline's own check naming what went non-finite (kohya's "NaN detected in latents")
        r"|(?<!\bno )(?<!\bnot )\bnan (?:detected|encountered) in (?:the )?(?:loss|latents?|grad\w*|logits|outputs?|activations?)\b"
        r"(?!\s*[:=]\s*(?:false|0|none)\b)"
        r"|(?<![\w-])(?:xent|ppl|perplexity|nll)\s*[:=]\s*[-+]?(?:nan|inf)\b"
        # W&B's run summary at the end: "wandb:       val_loss nan"
        r"|^wandb:\s+(?!\w*(?:best|min|max|lowest|prev|init|scale))\w*loss\w*\s+[-+]?(?:nan|inf)\s*$"
        # Marian's progress line: "Cost nan : Time ..."
        r"|\bCost nan\b",
        0.85,
        "loss or gradients became NaN/Inf",
    ),
    _s(
        "fp16-overflow-step",
        _C.NUMERICAL_INSTABILITY,
        "overflow",
        r"OVERFLOW! Rank \d+ Skipping step",
        0.3,
        "fp16 overflow, step skipped (normal while the loss scale settles)",
        symptom=True,
    ),
    _s(
        "dataloader-worker-exit",
        _C.DATA_PIPELINE_ERROR,
        "dataloader worker|encountered in worker|pin memory thread",
        r"DataLoader worker \(pids?\(?s?\)? ?[\d, ]+\)? (?:exited unexpectedly|is killed by signal:"
        r" (?!Killed|Terminated))"
        # the worker's own report of the signal that killed it, and the pin-memory thread's end
        r"|Unexpected (?:segmentation fault|floating-point exception) encountered in worker"
        r"|Pin memory thread exited unexpectedly",
        0.8,
        "a DataLoader worker crashed",
    ),
    _s(
        "dataloader-worker-terminated",
        _C.DATA_PIPELINE_ERROR,
        "dataloader worker",
        r"DataLoader worker \(pid[^)]*\) is killed by signal: Terminated",
        0.3,
        "a DataLoader worker was stopped with its job (SIGTERM)",
        symptom=True,
    ),
    _s(
        "dataloader-caught",
        _C.DATA_PIPELINE_ERROR,
        "dataloader worker process",
        r"Caught \w+ in DataLoader worker process",
        0.8,
        "an exception in a DataLoader worker (bad sample or decoder)",
    ),
    _s(
        "dataloader-timeout",
        _C.DATA_PIPELINE_ERROR,
        "dataloader",
        r"DataLoader timed out after \d+ seconds",
        0.85,
        "data fetch timed out",
    ),
    # a read from a remote data source (a streamed dataset, an object store) timed out; a
    # download at start-up fails the same way, hence less than certain
    _s(
        "remote-read-timeout",
        _C.DATA_PIPELINE_ERROR,
        "read timed out",
        r"ReadTimeoutError: HTTPS?ConnectionPool\(host=(?!'?api\.wandb\.ai)\S+ port=\d+\): Read timed out",
        0.6,
        "a read from a remote data source timed out",
        symptom=True,
    ),
    _s(
        "arrow-offset-overflow",
        _C.DATA_PIPELINE_ERROR,
        "offset overflow",
        r"ArrowInvalid: offset overflow while concatenating arrays",
        0.75,
        "the dataset's column outgrew one Arrow array (too large a dataset or sample)",
    ),
    _s(
        "data-file-corrupt",
        _C.DATA_PIPELINE_ERROR,
        "parquet magic|readerror|tar file truncated|json parse error|corrupted record",
        # a dataset shard cut short or not what its name says: Arrow's Parquet reader, a
        # WebDataset or tar shard
        r"ArrowInvalid: Parquet magic bytes not found|Parquet magic bytes not found in footer"
        r"|tarfile\.ReadError: (?:unexpected end of data|truncated header|invalid header|empty file)"
        r"|\btar file truncated"
        # Arrow reading a JSON-lines data file that is not valid JSON
        r"|ArrowInvalid: JSON parse error"
        # a TFRecord file whose record checksum fails
        r"|DataLossError: corrupted record at \d+",
        0.75,
        "a data file is corrupt or truncated",
    ),
    # a dataset file whose compressed or stored bytes end early: NumPy's `.npy` reader, zlib inside
    # an `.npz`, GDAL/libtiff on a raster tile (the image loaders' own words are below)
    _s(
        "data-file-short",
        _C.DATA_PIPELINE_ERROR,
        "no data left in file|zlib.error|tifffillstrip|tiffreadencodedstrip|ireadblock failed",
        r"^\s*No data left in file$|(?:Value|EOF)Error: No data left in file"
        r"|zlib\.error: Error -?\d+ while decompressing data"
        r"|ERROR \d+: (?:TIFFFillStrip:Read error|TIFFReadEncodedStrip\(\) failed|.*IReadBlock failed)",
        0.75,
        "a data file could not be read (cut short, corrupt, or its source failed: NumPy, zlib, GDAL)",
    ),
    # FFmpeg (through PyAV, decord, torchvision.io or OpenCV) on a video sample it cannot open: an
    # MP4 cut short or empty has no index (`moov atom`), other damage is "invalid data". Loaders
    # often skip such a sample and train on, so it decides only where nothing else is said
    _s(
        "video-decode",
        _C.DATA_PIPELINE_ERROR,
        "moov atom|invalid data found|invaliddataerror",
        r"\bmoov atom not found|Invalid data found when processing input|\bav\.error\.InvalidDataError\b",
        0.6,
        "a video sample FFmpeg cannot decode (an empty, truncated or corrupt file)",
        symptom=True,
    ),
    # OpenCV's FFmpeg reader gave up on a stream that stopped delivering: a video file read from
    # a filesystem that stalls (a network filesystem under load), before the loader's own error
    _s(
        "video-read-stalled",
        _C.STORAGE_ERROR,
        "stream timeout triggered",
        r"_opencv_ffmpeg_interrupt_callback Stream timeout triggered after \d+(?:\.\d+)? ms",
        0.85,
        "reading a video stalled until OpenCV gave up: the storage it is read from stopped answering",
    ),
    # DALI's GPU JPEG decoder on a file it cannot decode (nvJPEG's BAD_JPEG, JPEG_NOT_SUPPORTED)
    _s(
        "nvjpeg-bad-image",
        _C.DATA_PIPELINE_ERROR,
        "nvjpeg",
        r'NVJPEG error "[34]"|NVJPEG_STATUS_(?:BAD_JPEG|JPEG_NOT_SUPPORTED)',
        0.75,
        "an image the GPU JPEG decoder cannot decode (a corrupt or unsupported sample)",
    ),
    # ... and its allocator refused (an oversized image)
    _s(
        "nvjpeg-allocator-failure",
        _C.GPU_OOM,
        "nvjpeg",
        r'NVJPEG error "5"|NVJPEG_STATUS_ALLOCATOR_FAILURE',
        0.75,
        "the GPU JPEG decoder's allocator ran out of memory",
    ),
    # Petastorm's reader read after it stopped (its worker failed, or the context closed)
    _s(
        "petastorm-reader-stopped",
        _C.DATA_PIPELINE_ERROR,
        "has stopped",
        r"Trying to read a sample after a reader created by make_(?:batch_)?reader(?:/make_batch_reader)? has stopped",
        0.75,
        "the data reader was read after it had stopped",
    ),
    _s(
        "image-decode",
        _C.DATA_PIPELINE_ERROR,
        "image|decompressionbomb|unknown format|format not recognised|file is malformed|libsndfileerror|src.empty",
        r"UnidentifiedImageError|cannot identify image file|DecompressionBombError"
        r"|image file is truncated|\bLibsndfileError\b|broken data stream when reading image file"
        # OpenCV handed an image that did not load (cv2.imread returned nothing: a missing or
        # unreadable file in the dataset)
        r"|\(-215:Assertion failed\) !_?src\.empty\(\)"
        # libsndfile (soundfile) on an audio file it cannot decode
        r"|Error opening .*: (?:File contains data in an unknown format|Format not recognised"
        r"|Supported file format but file is malformed)",
        0.8,
        "a corrupt input sample",
    ),
    _s(
        "device-side-assert",
        _C.USER_CODE_ERROR,
        "assert",
        # glibc's newer form quotes the expression 'thus' (a host-side assert in an extension)
        r"device-side assert triggered|Assertion `[^`]+` failed",
        0.85,
        "a device-side assert (bad index or label in the training code)",
    ),
    # glibc's newer quoted form of a host-side assert in an extension or a compiler (Triton's
    # MLIR passes too): a bug in code, not always the job's own; weaker than a device assert
    _s(
        "host-assert",
        _C.USER_CODE_ERROR,
        "assertion '",
        r": Assertion '[^']+' failed\.",
        0.6,
        "an assertion in native code failed",
    ),
    # NCCL refusing a call it was given wrong (two ranks on one GPU, counts that differ across
    # ranks, a communicator used after its abort); its own warning, when printed, is stronger
    _s(
        "nccl-invalid-usage",
        _C.USER_CODE_ERROR,
        "invalid usage|ncclinvalidusage",
        r"NCCL error.{0,120}\binvalid usage\b|\bncclInvalidUsage\b",
        0.55,
        "NCCL refused a call as invalid usage (the launch's device assignment or mismatched calls)",
    ),
    # the same collective called with different sizes on different ranks
    _s(
        "nccl-message-truncated",
        _C.USER_CODE_ERROR,
        "message truncated",
        r"NCCL WARN Message truncated : received \d+ bytes instead of \d+",
        0.6,
        "ranks called one collective with different sizes",
    ),
    _s(
        "nccl-duplicate-gpu",
        _C.USER_CODE_ERROR,
        "duplicate gpu",
        r"Duplicate GPU detected : rank \d+ and rank \d+ both on CUDA device",
        0.85,
        "two ranks were placed on one GPU (the launch's device assignment)",
    ),
    _s(
        "shape-mismatch",
        _C.USER_CODE_ERROR,
        "shape|size mismatch|must match the size|channels, but got|split_with_sizes",
        r"shapes cannot be multiplied|size mismatch|must match the size of tensor"
        r"|split_with_sizes expects split_sizes to sum exactly to \d+"
        r"|shape '\[[^\]]*\]' is invalid for input of size"
        r"|Given (?:groups|transposed)=\d+, weight of size .* expected input.* to have \d+ channels, but got \d+",
        0.8,
        "a tensor shape mismatch",
    ),
    _s(
        "device-mismatch",
        _C.USER_CODE_ERROR,
        "expected|should be the same|parameters and buffers on device",
        r"Expected all tensors to be on the same device|expected scalar type \w+ but found"
        r"|Input type \([^)]+\) and (?:weight|bias) type \([^)]+\) should be the same"
        r"|module must have its parameters and buffers on device \S+ \(device_ids\[0\]\) but found",
        0.8,
        "tensors on different devices or dtypes",
    ),
    _s(
        "autograd-misuse",
        _C.USER_CODE_ERROR,
        "inplace|backward|reduction|mark a variable|does not require grad",
        r"modified by an inplace operation|Trying to backward through the graph a second time"
        r"|element 0 of tensors does not require grad and does not have a grad_fn"
        r"|Expected to have finished reduction in the prior iteration"
        r"|Expected to mark a variable ready only once",
        0.8,
        "autograd / DDP misuse",
    ),
    # the command names a script that is not there: every attempt fails at its first line
    _s(
        "script-not-found",
        _C.USER_CODE_ERROR,
        "can't open file",
        r"python[\d.]*: can't open file '[^']+': \[Errno 2\] No such file or directory",
        0.85,
        "the command names a script that does not exist",
    ),
    # the script uses CUDA or torch.distributed in an order they do not allow: the code's bug on
    # every run, whatever the machine
    _s(
        "distributed-api-misuse",
        _C.USER_CODE_ERROR,
        "re-initialize cuda|cuda is already initialized|process group has not been initialized"
        "|same model across all ranks|no backend type associated",
        r"Cannot re-initialize CUDA in forked subprocess|can't create new processes if CUDA is already initialized"
        r"|Default process group has not been initialized|DDP expects same model across all ranks"
        # a collective handed CPU tensors on a process group with only a GPU backend
        r"|No backend type associated with device type (?:cpu|cuda|meta)\b",
        0.8,
        "CUDA or torch.distributed used in an order they do not allow",
    ),
    # Lightning's refusal of a configuration: the trainer's arguments; where it names GPUs the
    # machine does not have, the machine does not fit the job
    _s(
        "lightning-misconfiguration",
        _C.USER_CODE_ERROR,
        "misconfigurationexception",
        r"MisconfigurationException:\s*\S",
        0.7,
        "Lightning refused the trainer's configuration",
    ),
    _s(
        "requested-gpus-missing",
        _C.ENVIRONMENT_ERROR,
        "but your machine only has|no supported gpu backend|accelerator is not available",
        r"You requested gpus?:? .* But your machine only has|No supported gpu backend found"
        r"|can not run on your system since the accelerator is not available",
        0.75,
        "the job asks for GPUs this machine does not have",
    ),
    # the toolkit, driver or an extension's build does not fit the GPU or the torch installed
    _s(
        "toolkit-does-not-fit",
        _C.ENVIRONMENT_ERROR,
        "unsupported gpu architecture|does not match the version used to compile|this system is not supported by the"
        "|incorrectly set up environment|is not defined for option 'gpu-name'",
        r"nvcc fatal\s*: Unsupported gpu architecture"
        # ptxas (XLA's, Triton's) too old for the GPU it is asked to build for
        r"|ptxas fatal\s*: Value 'sm_\w+' is not defined for option 'gpu-name'"
        r"|Cuda extensions are being compiled with a version of Cuda that does not match the version used to compile"
        # the driver's refusal, which the kernel log splits over three NVRM lines
        r"|NVRM:.*(?:installed )?in this system is\s+not supported by the"
        r"|(?:CUDA initialization: )?CUDA unknown error - this may be due to an incorrectly set up environment",
        0.8,
        "the CUDA toolkit, driver or an extension build does not fit this GPU or this torch",
    ),
    _s(
        "bnb-without-gpu",
        _C.ENVIRONMENT_ERROR,
        "compiled without gpu support",
        # a warning at import; the failure comes when an 8-bit optimizer is used
        # no stronger than an unspecific RuntimeError: printed at import by runs that never use it
        r"bitsandbytes was compiled without GPU support",
        0.3,
        "bitsandbytes was installed without its GPU build",
        symptom=True,
    ),
    # the Hub unreachable for a dataset, after datasets' fall-back to its cache failed too
    _s(
        "data-fetch-failed",
        _C.DATA_PIPELINE_ERROR,
        "on the hub",
        r"Couldn't reach '[^']+' on the Hub",
        0.7,
        "the dataset could not be fetched from the Hub",
    ),
    # DataLoader workers unable to pass their tensors' file descriptors: the process's open-file
    # limit (`ulimit -n`) under the file_descriptor sharing strategy, the same on every restart
    _s(
        "fd-limit-ancdata",
        _C.ENVIRONMENT_ERROR,
        "ancdata|too many open files",
        # or the limit named outright (EMFILE)
        r"received 0 items of ancdata|\[Errno 24\] Too many open files",
        0.7,
        "the open-file limit is too low for the DataLoader's workers to hand over tensors",
    ),
    # Transformers loading a checkpoint directory with no weights file in it
    _s(
        "no-weights-in-checkpoint",
        _C.CHECKPOINT_ERROR,
        "no file named",
        r"Error no file named \S*(?:pytorch_model|model|tf_model)\.(?:bin|safetensors|h5)\S*.* found in directory",
        0.8,
        "the checkpoint directory holds no weights file",
    ),
    # torch.compile meeting code it cannot trace: the code's, on every run
    _s(
        "dynamo-unsupported",
        _C.USER_CODE_ERROR,
        "_dynamo.exc.unsupported",
        r"torch\._dynamo\.exc\.Unsupported:",
        0.6,
        "torch.compile cannot trace this code",
        # also logged at a graph break, or with errors suppressed, by runs that go on
        symptom=True,
    ),
    # a bare `assert` that failed, closing a traceback with no message
    _s(
        "bare-assertion",
        _C.USER_CODE_ERROR,
        "assertionerror",
        r"^(?:[\w.]+\.)?AssertionError\s*$",
        0.6,
        "an assertion in the training code failed",
    ),
    # SageMaker's failure reason: the script's traceback folded onto one line after
    # "AlgorithmError:"; a named fault in it (an OOM, a CUDA error) is stronger than this
    _s(
        "sagemaker-script-exception",
        _C.USER_CODE_ERROR,
        "algorithmerror",
        rf"AlgorithmError: .{{0,2000}}?Traceback \(most recent call last\):.{{0,4000}}?\b{_CODE_EXCEPTIONS}: \S",
        0.7,
        "a Python exception in the training script (as SageMaker reports it)",
    ),
    _s(
        "python-exception",
        _C.USER_CODE_ERROR,
        "error",
        # (a traceback pasted indented a little, as an issue's list item shows it; not pip's
        # build output, six deep, whose errors are the environment's)
        rf"^ {{0,4}}(?:[\w.]+\.)?{_CODE_EXCEPTIONS}\b:\s*\S",
        0.7,
        "a Python exception in the training code",
    ),
    # failures a RuntimeError names that are not the code's: the GPU's driver, the host's memory,
    # NumPy's ABI, a communicator aborted for a peer
    _s(
        "nvml-caching-allocator-assert",
        _C.CUDA_ERROR,
        "nvml_success",
        r"NVML_SUCCESS == r INTERNAL ASSERT FAILED",
        0.6,
        "the CUDA caching allocator could not query the GPU through NVML (the driver or the GPU)",
    ),
    _s(
        "cuda-driver-error",
        _C.CUDA_ERROR,
        "cuda driver error",
        r"CUDA driver error: (?!out of memory)\w",
        0.5,
        "a CUDA driver call failed",
    ),
    _s(
        "numpy-not-available",
        _C.ENVIRONMENT_ERROR,
        "numpy is not available",
        r"RuntimeError: Numpy is not available",
        0.7,
        "torch cannot use this NumPy (built for another major version)",
    ),
    _s(
        "host-mmap-refused",
        _C.HOST_OOM,
        "unable to mmap",
        r"unable to mmap \d+ bytes.{0,200}Cannot allocate memory",
        0.7,
        "the host refused memory to a map (out of memory)",
    ),
    _s(
        "nccl-communicator-aborted",
        _C.NETWORK_ERROR,
        "communicator was aborted",
        r"NCCL communicator was aborted on rank \d+\.\s*$",
        0.5,
        "a rank's NCCL communicator was aborted (a peer failed)",
        symptom=True,
    ),
    _s(
        "generic-runtime-error",
        _C.USER_CODE_ERROR,
        "runtimeerror",
        r"^RuntimeError:",
        0.3,
        "an unspecific RuntimeError",
        symptom=True,
    ),
)

#: Xid number -> (category, strength, meaning). Per docs/field-facts.md: 79/119/120 (and the other
#: "GPU stopped answering" codes) drain the GPU; 48/63/64/92/94/95 are memory; 74 is NVLink;
#: 13/31/43 are application-side CUDA faults unless they repeat on the same GPU; 45 and 154 only
#: follow another Xid and so name no cause of their own. NVIDIA's current catalog adds NVLink5
#: (144-150, B100/GB200), C2C (121) and the Hopper/Blackwell codes below; none of them is rated
#: 0.9, so the set of Xids that stop an attempt at once is unchanged. Codes not listed are not
#: classified.
XID_TABLE: dict[int, tuple[Category | None, float, str]] = {
    79: (_C.GPU_FALLEN_OFF_BUS, 0.95, "GPU fell off the bus"),
    119: (_C.GPU_FALLEN_OFF_BUS, 0.9, "GSP RPC timeout"),
    120: (_C.GPU_FALLEN_OFF_BUS, 0.9, "GSP error"),
    62: (_C.GPU_FALLEN_OFF_BUS, 0.8, "internal micro-controller halt"),
    140: (_C.GPU_FALLEN_OFF_BUS, 0.8, "unrecovered ECC escape"),
    143: (_C.GPU_FALLEN_OFF_BUS, 0.8, "GPU initialisation failure"),
    158: (_C.GPU_FALLEN_OFF_BUS, 0.85, "GPU fatal timeout"),
    169: (_C.GPU_FALLEN_OFF_BUS, 0.8, "SEC2 micro-controller halt"),
    48: (_C.GPU_MEMORY_ERROR, 0.95, "double-bit ECC error"),
    63: (_C.GPU_MEMORY_ERROR, 0.75, "row remapping recorded"),
    64: (_C.GPU_MEMORY_ERROR, 0.9, "row remapping failed"),
    92: (_C.GPU_MEMORY_ERROR, 0.6, "high single-bit ECC rate"),
    94: (_C.GPU_MEMORY_ERROR, 0.85, "contained ECC error"),
    95: (_C.GPU_MEMORY_ERROR, 0.95, "uncontained ECC error"),
    171: (_C.GPU_MEMORY_ERROR, 0.85, "uncorrectable DRAM error (detail of an Xid 48)"),
    172: (_C.GPU_MEMORY_ERROR, 0.85, "uncorrectable SRAM error (detail of an Xid 48)"),
    74: (_C.NVLINK_ERROR, 0.9, "NVLink error"),
    121: (_C.NVLINK_ERROR, 0.4, "corrected C2C (Grace-GPU NVLink) errors"),
    136: (_C.NVLINK_ERROR, 0.8, "NVLink training failed"),
    144: (_C.NVLINK_ERROR, 0.85, "NVLink5 SAW error"),
    145: (_C.NVLINK_ERROR, 0.85, "NVLink5 RLW error"),
    146: (_C.NVLINK_ERROR, 0.85, "NVLink5 TLW error"),
    147: (_C.NVLINK_ERROR, 0.85, "NVLink5 TREX error"),
    148: (_C.NVLINK_ERROR, 0.85, "NVLink5 NVLPW_CTRL error"),
    149: (_C.NVLINK_ERROR, 0.85, "NVLink5 NETIR (link) error"),
    150: (_C.NVLINK_ERROR, 0.85, "NVLink5 MSE error"),
    155: (_C.NVLINK_ERROR, 0.6, "NVLink link down (software defined)"),
    167: (_C.PCIE_ERROR, 0.85, "PCIe fatal timeout"),
    13: (_C.CUDA_ERROR, 0.6, "graphics engine exception (application-side)"),
    31: (_C.CUDA_ERROR, 0.6, "GPU memory page fault (application-side)"),
    43: (_C.CUDA_ERROR, 0.6, "GPU stopped processing (application-side)"),
    68: (_C.CUDA_ERROR, 0.5, "video decoder exception (application-side)"),
    69: (_C.CUDA_ERROR, 0.5, "graphics engine class error (application-side)"),
    109: (_C.CUDA_ERROR, 0.55, "context switch timeout"),
    137: (_C.CUDA_ERROR, 0.55, "NVLink privilege error (illegal peer access, application-side)"),
    45: (None, 0.0, "cleanup after another Xid"),
    154: (None, 0.0, "recovery action changed (follows another Xid)"),
}
#: Xid codes that are application-side on their own; repeated on one GPU they point at hardware.
APP_SIDE_XIDS = frozenset({13, 31, 43, 68, 69})
# The two sets below live beside the table, free of pandas, so that `triage health-check` reads
# them without loading the analyzers; `analyzers.gpu_health` re-exports them.
#: Xids that record a fault the GPU survived (row remap pending, high single-bit rate, corrected C2C
#: errors): worth an
#: incident, never the reason an attempt ended.
NON_FATAL_XIDS = frozenset({63, 92, 121})
#: Xids after which the GPU does no more work for its rank, so a running attempt is stopped and
#: diagnosed as soon as one arrives instead of waiting for the hang it causes: the GPU-lost and
#: uncorrectable-memory codes the Xid table rates 0.9 or more (79, 119, 120, 48, 64, 95). Not
#: 94 (contained: the application may go on), 74 (NVLink: can be sympathetic to the GPU at the
#: other end), nor the application-side codes, whose own error ends the attempt anyway.
IMMEDIATE_XIDS = frozenset(
    xid
    for xid, (category, strength, _) in XID_TABLE.items()
    if category in (_C.GPU_FALLEN_OFF_BUS, _C.GPU_MEMORY_ERROR)
    and strength >= 0.9
    and xid not in NON_FATAL_XIDS
)

#: `NVRM: Xid (PCI:0000:3b:00): 79, ...`; also no `PCI:` prefix, MIG `GPU-I:nn` and `Xid 79`.
XID_RE = re.compile(
    r"(?:\bS?Xid\b\s*(?:\((?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
    r"(?:\.\d)?)?[^)]*\))?\s*:?\s*"
    # DCGM's health watch and diagnostic: "Detected XID 79 for GPU 2", "an uncontained error (XID 95)"
    r"|\bDetected XID |\buncontained error \(XID (?=\d+\)))(?P<code>\d{1,3})\b"
)

#: The driver's tag on an Xid raised in the wake of another (`45, ... Ch 00000001 caused by previous
#: Xid 149`): the earlier Xid is the cause.
CAUSED_BY_XID_RE = re.compile(r"caused by previous Xid\s+(\d{1,3})\b", re.IGNORECASE)

_KEYWORDS = sorted({k for s in SIGNATURES for k in s.keywords} | {"xid"}, key=len, reverse=True)


#: A character trie: each key is the next character ("" marks the end of a word).
_Trie: TypeAlias = dict[str, "_Trie"]


def _trie_pattern(words: list[str]) -> str:
    """One regex for many literals, factored by common prefix: a flat alternation of a hundred
    keywords is tried keyword by keyword at every position, a trie branches once per character.
    The longest keyword wins at a position, as in a longest-first alternation."""
    trie: _Trie = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: _Trie) -> str:
        ends = "" in node
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if ends else body

    return emit(trie)


#: Every keyword in one trie-shaped regex, matched on the lower-cased line: a line that contains
#: none is skipped at C speed, and the keywords it does contain select the signatures to run.
KEYWORDS_RE = re.compile(_trie_pattern(_KEYWORDS))
#: keyword found in a line -> signatures to try. The alternation reports the longest keyword at a
#: position, so a found keyword also selects the signatures of every keyword inside it.
SIGNATURES_BY_KEYWORD: dict[str, tuple[Signature, ...]] = {
    found: tuple(s for s in SIGNATURES if any(k in found for k in s.keywords)) for found in _KEYWORDS
}
