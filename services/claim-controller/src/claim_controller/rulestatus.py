"""The ``EvictionInProgress`` condition of a DeviceTaintRule (pure), as upstream's device-taint eviction
controller (v1.37) writes it.

================  =====================  ======  ==========================================================
effect            reason                 status  message
================  =====================  ======  ==========================================================
NoExecute         ``PodsPendingEviction`` True   ``N pods need to be evicted in M different namespaces.``
NoExecute         ``Completed``           False  (pods were evicted because of this rule)
NoExecute         ``NotStarted``          False  (none evicted, none pending)
None              ``NoEffect``            False  what would happen with NoExecute: devices selected in
                                                 slices and in allocations, pods that would be evicted
other             ``OtherEffect``         False  ``Eviction only happens for the NoExecute effect.``
================  =====================  ======  ==========================================================

Any reason gets `` N pods evicted since starting the controller.`` appended when that is not 0. The
condition is written at most once per ``period`` (10 s upstream) for the same ``metadata.generation``
(:func:`wait_before_update`), and only when type, status, reason, message or observedGeneration change
(:func:`needs_write`); ``lastTransitionTime`` is bumped on every write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from draflow_runtime.devicetaints import NO_EXECUTE, NONE, parse_time

__all__ = ["CONDITION", "Counts", "existing_condition", "needs_write", "rule_condition",
           "wait_before_update"]

CONDITION = "EvictionInProgress"

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Counts:
    """What the condition reports. ``pending_pods`` in ``pending_namespaces``: pods not being deleted that
    this rule evicts (effect None: would evict); ``evicted``: pods this controller evicted because of the
    rule since it started; ``slice_devices`` / ``allocated_devices``: only for effect None."""

    pending_pods: int = 0
    pending_namespaces: int = 0
    evicted: int = 0
    slice_devices: int = 0
    allocated_devices: int = 0


def existing_condition(rule: Obj) -> dict[str, Any] | None:
    for condition in (rule.get("status") or {}).get("conditions") or ():
        if condition.get("type") == CONDITION:
            return dict(condition)
    return None


def wait_before_update(rule: Obj, now: float, period: float) -> float:
    """Seconds to wait before the condition may be recomputed (0: now)."""
    existing = existing_condition(rule)
    if existing is None:
        return 0.0
    if existing.get("observedGeneration") != (rule.get("metadata") or {}).get("generation"):
        return 0.0
    since = now - (parse_time(existing.get("lastTransitionTime")) or 0.0)
    return max(period - since, 0.0) if since < period else 0.0


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many.format(n=n)


def rule_condition(rule: Obj, counts: Counts) -> dict[str, Any]:
    """The condition (without ``lastTransitionTime``) for ``rule`` and ``counts``."""
    effect = ((rule.get("spec") or {}).get("taint") or {}).get("effect", "")
    status, reason, message = "False", f"Effect{effect}", ""
    if effect == NO_EXECUTE:
        if counts.pending_pods > 0:
            status, reason = "True", "PodsPendingEviction"
            message = _plural(counts.pending_pods, "1 pod needs to be evicted in ",
                              "{n} pods need to be evicted in ")
            message += _plural(counts.pending_namespaces, "1 namespace.", "{n} different namespaces.")
        elif counts.evicted > 0:
            reason = "Completed"
        else:
            reason = "NotStarted"
    elif effect == NONE:
        reason = "NoEffect"
        message = (
            _plural(counts.slice_devices, "1 published device selected. ", "{n} published devices selected. ")
            + _plural(counts.allocated_devices, "1 allocated device selected. ",
                      "{n} allocated devices selected. ")
            + _plural(counts.pending_pods, "1 pod would be evicted in ", "{n} pods would be evicted in ")
            + _plural(counts.pending_namespaces, "1 namespace ", "{n} different namespaces ")
            + "if the effect was NoExecute. This information will not be updated again. "
            "Recreate the DeviceTaintRule to trigger an update."
        )
    else:
        reason = "OtherEffect"
        message = "Eviction only happens for the NoExecute effect."
    if counts.evicted > 0:
        if message:
            message += " "
        message += _plural(counts.evicted, "1 pod ", "{n} pods ") + "evicted since starting the controller."
    return {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": (rule.get("metadata") or {}).get("generation", 0),
    }


def needs_write(rule: Obj, condition: Mapping[str, Any]) -> bool:
    """Does ``condition`` differ from the rule's current one (``lastTransitionTime`` aside)?"""
    existing = existing_condition(rule)
    if existing is None:
        return True
    return any(existing.get(k, "" if k != "observedGeneration" else 0) != v for k, v in condition.items())
