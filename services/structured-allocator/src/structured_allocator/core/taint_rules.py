"""DeviceTaintRules applied to ResourceSlices (pure): the effective taints of a device are its own
``taints`` plus those of every rule whose ``spec.deviceSelector`` matches it.

Upstream counterpart: the ResourceSlice tracker of ``k8s.io/dynamic-resource-allocation/resourceslice/
tracker``, which hands the scheduler slices with the rules' taints patched in. Selection is
:func:`draflow_runtime.devicetaints.rule_selects`, the one the claim-controller's eviction uses: a rule
without ``spec.deviceSelector`` selects nothing, the empty selector every device, and each field that is set
(``driver``, ``pool``, ``device``) must be equal. A rule
taint without ``timeAdded`` gets the rule's ``creationTimestamp``. Rules are applied in name order so the
result does not depend on informer order.

:func:`apply_taint_rules` returns the slice object itself when no rule touches it (the prepared slice and
its selector memo survive), otherwise a copy whose ``metadata.resourceVersion`` carries a digest of the
added taints: the :class:`~.pools.SliceIndex` then re-prepares the slice exactly when its effective taints
change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.devicetaints import rule_selects

__all__ = ["apply_taint_rules", "rule_matches", "rule_taint", "rule_touches_pool"]


def rule_matches(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    """Does ``rule`` select device ``driver/pool/device``? (See the module docstring.)"""
    return rule_selects(rule, driver, pool, device)


def rule_touches_pool(rule: Mapping[str, Any], driver: str, pool: str) -> bool:
    """Could ``rule`` select any device of pool ``driver/pool``?"""
    sel = (rule.get("spec") or {}).get("deviceSelector")
    if sel is None:
        return False
    return all(sel.get(k) is None or sel[k] == v for k, v in (("driver", driver), ("pool", pool)))


def rule_taint(rule: Mapping[str, Any]) -> dict[str, Any] | None:
    """The taint ``rule`` adds (``timeAdded`` defaulted to the rule's creation time), or None."""
    taint = (rule.get("spec") or {}).get("taint")
    if not taint or not taint.get("key"):
        return None
    out = dict(taint)
    created = (rule.get("metadata") or {}).get("creationTimestamp")
    if not out.get("timeAdded") and created:
        out["timeAdded"] = created
    return out


def apply_taint_rules(raw: Mapping[str, Any], rules: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """``raw`` with the taints of matching ``rules`` appended to its devices (see the module docstring)."""
    spec = raw.get("spec") or {}
    driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
    relevant = sorted(
        (r for r in rules if rule_touches_pool(r, driver, pool) and rule_taint(r) is not None),
        key=lambda r: (r.get("metadata") or {}).get("name", ""),
    )
    if not relevant or not spec.get("devices"):
        return raw
    added: list[tuple[str, str, dict[str, Any]]] = []  # (device, rule, taint)
    devices: list[Mapping[str, Any]] = []
    for device in spec["devices"]:
        name = device.get("name", "")
        extra = []
        for rule in relevant:
            if rule_matches(rule, driver, pool, name):
                taint = rule_taint(rule)
                assert taint is not None
                extra.append(taint)
                added.append((name, (rule.get("metadata") or {}).get("name", ""), taint))
        devices.append({**device, "taints": [*(device.get("taints") or []), *extra]} if extra else device)
    if not added:
        return raw
    digest = hashlib.sha256(json.dumps(added, sort_keys=True).encode()).hexdigest()[:12]
    meta = dict(raw.get("metadata") or {})
    if meta.get("resourceVersion") is not None:
        meta["resourceVersion"] = f"{meta['resourceVersion']}+rules.{digest}"
    return {**raw, "metadata": meta, "spec": {**spec, "devices": devices}}
