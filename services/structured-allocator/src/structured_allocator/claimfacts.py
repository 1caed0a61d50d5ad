"""Small pure facts the decider uses: the user-facing text of an allocation error, how many devices a
claim needs at least (to skip nodes with fewer free devices before searching), and how many it takes
wherever it fits, when that does not depend on the node (to rank nodes before searching)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import AllocationError, CelSelectorError, UnknownDeviceClassError

__all__ = ["describe_error", "exact_devices", "min_devices"]


def describe_error(err: AllocationError) -> str:
    """The user-facing text of broken input, naming the class and the expression."""
    if isinstance(err, UnknownDeviceClassError):
        return (f'DeviceClass "{err.device_class}" does not exist (claim "{err.claim}", '
                f'request "{err.request}")')
    text = str(err)
    if isinstance(err, CelSelectorError) and err.device:
        # The same for every device, so that the condition and Event are written once, not again
        # whenever another device happened to be evaluated first.
        text = text.replace(f" on device {err.device}", "")
    if isinstance(err, CelSelectorError) and err.device_class:
        return f'DeviceClass "{err.device_class}": {text}'  # the message names selector and expression
    return text


def min_devices(claim: Mapping[str, Any]) -> int | None:
    """Devices the claim needs at least, or None when that is unknown (All mode, admin access)."""
    total = 0
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        options = request.get("firstAvailable") or [request.get("exactly") or {}]
        counts = []
        for spec in options:
            if spec.get("allocationMode", "ExactCount") != "ExactCount" or spec.get("adminAccess"):
                return None
            counts.append(int(spec.get("count", 1)))
        total += min(counts) if counts else 0
    return total


def exact_devices(claim: Mapping[str, Any]) -> int | None:
    """How many devices the claim takes on any node where it fits: every request asks for an exact
    count (``exactly``, mode ``ExactCount``); None when it depends on the node (``firstAvailable``: the
    subrequest chosen there, ``All``: the devices there)."""
    total = 0
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        spec = request.get("exactly")
        if request.get("firstAvailable") or not spec:
            return None
        if spec.get("allocationMode", "ExactCount") != "ExactCount":
            return None
        total += int(spec.get("count", 1))
    return total
