"""One form for a GPU's PCI address, so NVML's bus id and the kernel log's can be matched.

NVML gives `00000000:3B:00.0` (8-digit domain, upper case, with function); the driver's Xid
lines give `PCI:0000:3b:00` (4-digit domain, no function); old drivers drop the `PCI:` prefix;
domains other than 0000 occur (docs/field-facts.md). Both become `dddd:bb:dd` in lower case.
"""

from __future__ import annotations

import re

_BUS_ID = re.compile(
    r"^(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<device>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<function>[0-7]))?$"
)


def normalize_pci_bus_id(bus_id: str | bytes) -> str:
    """`00000000:3B:00.0`, `PCI:0000:3b:00`, `3b:00.0` -> `0000:3b:00`.

    Raises ValueError on anything that is not a PCI address, so a garbled id is noticed rather
    than silently matching nothing.
    """
    text = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    m = _BUS_ID.match(text.strip().rstrip("\x00"))
    if not m:
        raise ValueError(f"not a PCI bus id: {text!r}")
    domain = int(m["domain"] or "0", 16)
    return f"{domain:04x}:{int(m['bus'], 16):02x}:{int(m['device'], 16):02x}"
