"""The failure taxonomy as code: the one source for categories, layers and default actions.

`tests/test_taxonomy.py` holds this table equal to `docs/failure-taxonomy.md`, so the CLI's
JSON, the store, Prometheus labels and the dashboard cannot drift from the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Layer(str, Enum):
    """Where in the stack a fault lives, from the top down; lower layers win ties in time."""

    APPLICATION = "application"
    FRAMEWORK = "framework"
    COMMUNICATION = "communication"
    GPU = "gpu"
    HOST = "host"
    INFRASTRUCTURE = "infrastructure"
    NONE = "—"

    @property
    def depth(self) -> int:
        """0 for application ... 5 for infrastructure; `unknown`'s layer sorts above all."""
        return _LAYER_ORDER.index(self)


_LAYER_ORDER = [
    Layer.NONE,
    Layer.APPLICATION,
    Layer.FRAMEWORK,
    Layer.COMMUNICATION,
    Layer.GPU,
    Layer.HOST,
    Layer.INFRASTRUCTURE,
]


class Action(str, Enum):
    """What the supervisor does with a verdict ("detect is not act")."""

    RESTART = "restart"
    RESTART_EXCLUDING_NODE = "restart_excluding_node"
    ROLLBACK = "rollback"
    CHECKPOINT_AND_REQUEUE = "checkpoint_and_requeue"
    FAIL_FAST = "fail_fast"
    ALERT = "alert"


class Category(str, Enum):
    USER_CODE_ERROR = "user_code_error"
    GPU_OOM = "gpu_oom"
    NUMERICAL_INSTABILITY = "numerical_instability"
    DATA_PIPELINE_ERROR = "data_pipeline_error"
    ENVIRONMENT_ERROR = "environment_error"
    CHECKPOINT_ERROR = "checkpoint_error"
    CUDA_ERROR = "cuda_error"
    COLLECTIVE_TIMEOUT = "collective_timeout"
    NETWORK_ERROR = "network_error"
    RENDEZVOUS_ERROR = "rendezvous_error"
    GPU_FALLEN_OFF_BUS = "gpu_fallen_off_bus"
    GPU_MEMORY_ERROR = "gpu_memory_error"
    NVLINK_ERROR = "nvlink_error"
    GPU_THROTTLING = "gpu_throttling"
    PCIE_ERROR = "pcie_error"
    HOST_OOM = "host_oom"
    STORAGE_ERROR = "storage_error"
    NODE_FAILURE = "node_failure"
    PREEMPTION = "preemption"
    STRAGGLER = "straggler"
    SILENT_DATA_CORRUPTION = "silent_data_corruption"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> Category:
        """A stored category name as a member; `unknown` for a name this version lacks (a
        newer Triage's, or a damaged row)."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.UNKNOWN

    @property
    def spec(self) -> CategorySpec:
        return TAXONOMY[self]

    @property
    def layer(self) -> Layer:
        return TAXONOMY[self].layer

    @property
    def action(self) -> Action:
        return TAXONOMY[self].action


@dataclass(frozen=True)
class CategorySpec:
    """One row of the taxonomy.

    `action` is the default; `escalation` is the second action the row names ("restart once,
    then fail_fast", "alert, then restart_excluding_node if it repeats"), applied by the
    supervisor's restart policy when the same failure comes back. `exclude_culprit_if_found`
    is the collective-timeout rule: restart, leaving out the culprit's node when one is known.
    """

    category: Category
    layer: Layer
    action: Action
    escalation: Action | None
    what: str
    exclude_culprit_if_found: bool = False


def _row(
    cat: Category,
    layer: Layer,
    action: Action,
    what: str,
    escalation: Action | None = None,
    exclude_culprit_if_found: bool = False,
) -> CategorySpec:
    return CategorySpec(cat, layer, action, escalation, what, exclude_culprit_if_found)


_C, _L, _A = Category, Layer, Action
TAXONOMY: dict[Category, CategorySpec] = {
    s.category: s
    for s in [
        _row(_C.USER_CODE_ERROR, _L.APPLICATION, _A.FAIL_FAST, "a deterministic bug in training code"),
        _row(_C.GPU_OOM, _L.APPLICATION, _A.FAIL_FAST, "the GPU ran out of memory"),
        _row(
            _C.NUMERICAL_INSTABILITY,
            _L.APPLICATION,
            _A.ROLLBACK,
            "loss or gradients became NaN/Inf or spiked",
        ),
        _row(_C.DATA_PIPELINE_ERROR, _L.APPLICATION, _A.RESTART, "the input pipeline failed or stalled"),
        _row(_C.ENVIRONMENT_ERROR, _L.FRAMEWORK, _A.FAIL_FAST, "the software stack does not fit the machine"),
        _row(_C.CHECKPOINT_ERROR, _L.FRAMEWORK, _A.RESTART, "a checkpoint could not be written or read back"),
        _row(
            _C.CUDA_ERROR,
            _L.FRAMEWORK,
            _A.RESTART,
            "a CUDA runtime fault with no hardware signal behind it",
            _A.FAIL_FAST,
        ),
        _row(
            _C.COLLECTIVE_TIMEOUT,
            _L.COMMUNICATION,
            _A.RESTART,
            "a collective or barrier never completed",
            exclude_culprit_if_found=True,
        ),
        _row(
            _C.NETWORK_ERROR,
            _L.COMMUNICATION,
            _A.RESTART_EXCLUDING_NODE,
            "the transport between ranks failed",
        ),
        _row(_C.RENDEZVOUS_ERROR, _L.INFRASTRUCTURE, _A.RESTART, "ranks could not find each other at start"),
        _row(_C.GPU_FALLEN_OFF_BUS, _L.GPU, _A.RESTART_EXCLUDING_NODE, "a GPU stopped answering"),
        _row(_C.GPU_MEMORY_ERROR, _L.GPU, _A.RESTART_EXCLUDING_NODE, "HBM/SRAM ECC faults"),
        _row(
            _C.NVLINK_ERROR,
            _L.GPU,
            _A.RESTART_EXCLUDING_NODE,
            "NVLink or NVSwitch fault between GPUs of a node",
        ),
        _row(_C.GPU_THROTTLING, _L.GPU, _A.ALERT, "a GPU runs slow because of heat or power"),
        _row(
            _C.PCIE_ERROR,
            _L.HOST,
            _A.ALERT,
            "the PCIe path to a GPU or NIC degrades",
            _A.RESTART_EXCLUDING_NODE,
        ),
        _row(_C.HOST_OOM, _L.HOST, _A.RESTART, "the host ran out of memory and the kernel killed a process"),
        _row(_C.STORAGE_ERROR, _L.HOST, _A.RESTART, "the filesystem failed the job"),
        _row(_C.NODE_FAILURE, _L.HOST, _A.RESTART_EXCLUDING_NODE, "a whole node vanished"),
        _row(
            _C.PREEMPTION,
            _L.INFRASTRUCTURE,
            _A.CHECKPOINT_AND_REQUEUE,
            "the scheduler or operator stopped the job on purpose",
        ),
        _row(
            _C.STRAGGLER,
            _L.COMMUNICATION,
            _A.ALERT,
            "one rank or node is persistently slower and holds every collective back",
            _A.RESTART_EXCLUDING_NODE,
        ),
        _row(_C.SILENT_DATA_CORRUPTION, _L.GPU, _A.RESTART_EXCLUDING_NODE, "wrong numbers with no error"),
        _row(_C.UNKNOWN, _L.NONE, _A.ALERT, "nothing matched with enough confidence"),
    ]
}

#: Verdicts below this confidence are reported as `unknown` (taxonomy: "Confidence").
DEFAULT_CONFIDENCE_THRESHOLD = 0.5

#: Causes that say nothing about the culprit node's hardware: the job's own (its code, its
#: memory, its checkpoints), shared services (storage, the rendezvous store), the scheduler,
#: and no confident verdict. They never count against a node (quarantine, lemon nodes).
NOT_IMPLICATING_NODE = frozenset(c for c in Category if c.layer is Layer.APPLICATION) | {
    Category.HOST_OOM,
    Category.CHECKPOINT_ERROR,
    Category.STORAGE_ERROR,
    Category.RENDEZVOUS_ERROR,
    Category.PREEMPTION,
    Category.UNKNOWN,
}


def implicates_node(category: Category) -> bool:
    """Whether an incident of this category counts against its culprit node's hardware."""
    return category not in NOT_IMPLICATING_NODE
