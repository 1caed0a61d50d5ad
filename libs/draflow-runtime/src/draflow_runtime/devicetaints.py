"""Device taints and tolerations (pure): what more than one service needs to agree on.

``tolerates`` is upstream's ``resourceclaim.ToleratesTaint`` (the core/v1 toleration rule: an empty
effect or key matches any, operator ``Equal`` (the default) compares values, ``Exists`` does not).
``is_unhealthy``: the taint a driver (``<driver>/unhealthy``) or slice-publisher
(``draflow.dev/unhealthy``) puts on a device reported unhealthy. ``rule_selects`` is the DeviceTaintRule
selector as kube-controller-manager's device-taint eviction controller applies it (v1.37): a rule
without ``spec.deviceSelector`` selects nothing, the empty selector selects every device, each set
field (``driver``, ``pool``, ``device``) must be equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["NONE", "NO_EXECUTE", "NO_SCHEDULE", "UNHEALTHY_TAINT", "is_unhealthy", "parse_time",
           "rule_selects", "tolerates"]

NONE = "None"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
UNHEALTHY_TAINT = "draflow.dev/unhealthy"


def is_unhealthy(driver: str, taint: Mapping[str, Any]) -> bool:
    """Does ``taint`` mark a device reported unhealthy (``draflow.dev/unhealthy``, ``<driver>/unhealthy``)?"""
    return taint.get("key") in (UNHEALTHY_TAINT, f"{driver}/unhealthy")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Does ``toleration`` (a DeviceToleration) tolerate ``taint`` (a DeviceTaint)?"""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return op == "Exists"


def rule_selects(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    """Does DeviceTaintRule ``rule`` select device ``driver/pool/device``? (See the module docstring.)"""
    selector = (rule.get("spec") or {}).get("deviceSelector")
    if selector is None:
        return False
    wanted = (("driver", driver), ("pool", pool), ("device", device))
    return all(selector.get(k) is None or selector[k] == v for k, v in wanted)


def parse_time(value: str | None) -> float | None:
    """An RFC 3339 time of the API (``2026-01-02T03:04:05Z``) as POSIX seconds; None stays None."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
