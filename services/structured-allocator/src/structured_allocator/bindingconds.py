"""Binding conditions of allocated devices (pure): may the pod be bound yet?

DRADeviceBindingConditions (beta, on): a device published with ``bindingConditions`` (e.g. a fabric-attached
GPU that must be attached first) is allocated like any other, but the pod may only be bound once every one
of those conditions is ``True`` in the claim's ``status.devices[].conditions`` entry for that (driver, pool,
device), written by the driver or a controller. Any ``bindingFailureConditions`` that is ``True`` means the
attempt failed; so does waiting longer than the binding timeout after ``allocation.allocationTimestamp``.
Upstream: the scheduler's DynamicResources PreBind (wait) and Filter (such a claim is "unavailable").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from draflow_runtime.dra import allocation_results as _results

__all__ = ["BindingState", "BindingStatus", "binding_status", "needs_binding_conditions", "utcnow"]


class BindingState(enum.Enum):
    NONE = "none"  # no device has binding conditions: bind right away
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"  # a binding failure condition is True
    TIMED_OUT = "timed_out"

    @property
    def unavailable(self) -> bool:
        return self in (BindingState.FAILED, BindingState.TIMED_OUT)


@dataclass(frozen=True)
class BindingStatus:
    state: BindingState
    message: str = ""


def needs_binding_conditions(allocation: Mapping[str, Any] | None) -> bool:
    return any(r.get("bindingConditions") for r in _results(allocation))


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def binding_status(claim: Mapping[str, Any], allocation: Mapping[str, Any] | None = None, *,
                   now: datetime, timeout: float) -> BindingStatus:
    """The binding state of ``claim``; ``allocation`` overrides ``status.allocation`` (a write the
    informer does not show yet). Conditions are read from ``status.devices``."""
    status = claim.get("status") or {}
    allocation = allocation if allocation is not None else status.get("allocation")
    results = _results(allocation)
    if not any(r.get("bindingConditions") for r in results):
        return BindingStatus(BindingState.NONE)
    conditions: dict[tuple[str, str, str], dict[str, Mapping[str, Any]]] = {}
    for dev in status.get("devices") or []:
        key = (dev.get("driver", ""), dev.get("pool", ""), dev.get("device", ""))
        conditions.setdefault(key, {}).update({c.get("type", ""): c for c in dev.get("conditions") or []})
    waiting: list[str] = []
    for r in results:
        key = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
        name = "/".join(key)
        have = conditions.get(key, {})
        for ctype in r.get("bindingFailureConditions") or []:
            cond = have.get(ctype)
            if cond is not None and cond.get("status") == "True":
                detail = cond.get("message") or cond.get("reason") or ""
                return BindingStatus(BindingState.FAILED, f"device {name}: binding failure condition "
                                     f"{ctype} is True" + (f" ({detail})" if detail else ""))
        waiting += [f"{name}: {c}" for c in r.get("bindingConditions") or []
                    if (have.get(c) or {}).get("status") != "True"]
    if not waiting:
        return BindingStatus(BindingState.READY)
    started = _parse_time((allocation or {}).get("allocationTimestamp"))
    if started is not None and now >= started + timedelta(seconds=timeout):
        return BindingStatus(BindingState.TIMED_OUT, f"binding conditions not met within {timeout:g}s "
                             f"of the allocation: {', '.join(waiting)}")
    return BindingStatus(BindingState.PENDING, "waiting for binding conditions " + ", ".join(waiting))


def utcnow() -> datetime:
    return datetime.now(UTC)
