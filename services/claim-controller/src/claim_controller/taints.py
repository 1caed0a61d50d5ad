"""Which pods a NoExecute device taint evicts, and when (pure functions on plain dicts).

The decisions of kube-controller-manager's device-taint eviction controller (v1.37,
``pkg/controller/devicetainteviction``), in our own words:

- A device's NoExecute taints come from its ResourceSlice (only slices of the pool's newest
  ``spec.pool.generation`` count) and from every DeviceTaintRule with effect ``NoExecute`` that selects
  it (:func:`draflow_runtime.devicetaints.rule_selects`). Other effects never evict.
- The tolerations are those of the allocation result of the device (``status.allocation.devices.
  results[].tolerations``, copied there from the request by the allocator). Only a toleration with
  ``effect: NoExecute`` counts. One that tolerates the taint without ``tolerationSeconds`` ignores the
  taint for good; otherwise the smallest ``tolerationSeconds`` (negative: 0) delays the eviction.
- A claim is evicted at the earliest ``timeAdded (+ tolerationSeconds)`` of its untolerated taints;
  the reasons are all of those taints.
- A pod is evicted when it is bound to a node (``spec.nodeName``) and one of its claims, allocated and
  reserved for this pod (same UID; a generated claim must also be owned by it), is evicted; the
  earliest time of those claims, the union of their reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from draflow_runtime.devicetaints import NO_EXECUTE, parse_time, rule_selects, tolerates
from draflow_runtime.dra import claim_results, is_controlled_by, is_reserved_for, pod_claims

__all__ = ["Eviction", "TaintSource", "TaintView", "claim_eviction", "pod_eviction"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TaintSource:
    """Where one NoExecute taint comes from: a DeviceTaintRule (``rule``, ``rule_uid``) or taint number
    ``index`` of device ``driver/pool/device`` in ResourceSlice ``slice``."""

    rule: str = ""
    rule_uid: str = ""
    slice: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    index: int = 0

    def sort_key(self) -> tuple[int, str, str, str, str, int]:
        """Rules first (by name), then slice taints by driver, pool, device, index (as upstream)."""
        if self.rule:
            return (0, self.rule, "", "", "", 0)
        return (1, "", self.driver, self.pool, self.device, self.index)

    def __str__(self) -> str:
        if self.rule:
            return f"DeviceTaintRule {self.rule}"
        return f"ResourceSlice {self.slice} {self.driver}/{self.pool}/{self.device} taint #{self.index}"


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict at POSIX time ``when`` because of ``reasons`` (sorted, see :meth:`TaintSource.sort_key`)."""

    when: float
    reasons: tuple[TaintSource, ...]

    def rule_names(self) -> list[str]:
        return [r.rule for r in self.reasons if r.rule]

    def describe(self) -> str:
        return ", ".join(str(r) for r in self.reasons)


def _merge(a: Eviction | None, b: Eviction | None) -> Eviction | None:
    if a is None or b is None:
        return a or b
    reasons = sorted(set(a.reasons) | set(b.reasons), key=TaintSource.sort_key)
    return Eviction(min(a.when, b.when), tuple(reasons))


def _rule_taint(rule: Obj) -> dict[str, Any]:
    taint = dict((rule.get("spec") or {}).get("taint") or {})
    if not taint.get("timeAdded"):  # the API server sets it; an old object may lack it
        taint["timeAdded"] = (rule.get("metadata") or {}).get("creationTimestamp")
    return taint


class TaintView:
    """The NoExecute taints of devices, from the slices of a pool (``pool_slices(driver, pool)``) and
    the given DeviceTaintRules (those whose effect is not NoExecute are ignored)."""

    def __init__(self, pool_slices: Callable[[str, str], Iterable[Obj]], rules: Iterable[Obj]) -> None:
        self._pool_slices = pool_slices
        self._rules = [r for r in rules if ((r.get("spec") or {}).get("taint") or {}).get("effect")
                       == NO_EXECUTE]
        self._pools: dict[tuple[str, str], dict[str, list[tuple[TaintSource, Obj]]]] = {}

    def _published(self, driver: str, pool: str) -> dict[str, list[tuple[TaintSource, Obj]]]:
        cached = self._pools.get((driver, pool))
        if cached is not None:
            return cached
        slices = list(self._pool_slices(driver, pool))
        newest = max(((s.get("spec") or {}).get("pool") or {}).get("generation", 0) for s in slices) \
            if slices else 0
        out: dict[str, list[tuple[TaintSource, Obj]]] = {}
        for s in slices:
            spec = s.get("spec") or {}
            if (spec.get("pool") or {}).get("generation", 0) != newest:
                continue
            name = (s.get("metadata") or {}).get("name", "")
            for device in spec.get("devices") or ():
                for index, taint in enumerate(device.get("taints") or ()):
                    if taint.get("effect") == NO_EXECUTE:
                        source = TaintSource(slice=name, driver=driver, pool=pool,
                                             device=device.get("name", ""), index=index)
                        out.setdefault(device.get("name", ""), []).append((source, taint))
        self._pools[(driver, pool)] = out
        return out

    def device_taints(self, driver: str, pool: str, device: str) -> list[tuple[TaintSource, Obj]]:
        """Every NoExecute taint of the device with its source: the slice's, then the rules'."""
        taints = list(self._published(driver, pool).get(device, ()))
        for rule in self._rules:
            if rule_selects(rule, driver, pool, device):
                meta = rule.get("metadata") or {}
                taints.append((TaintSource(rule=meta.get("name", ""), rule_uid=meta.get("uid", "")),
                               _rule_taint(rule)))
        return taints

    def with_rules(self, rules: Iterable[Obj]) -> TaintView:
        """The same slices with other rules (the effect-None simulation of the rule status)."""
        view = TaintView(self._pool_slices, rules)
        view._pools = self._pools
        return view


def _taint_time(taint: Obj, tolerations: Sequence[Obj]) -> float | None:
    """When ``taint`` evicts under ``tolerations``, None when it is tolerated for good."""
    seconds: int | None = None
    for toleration in tolerations:
        if toleration.get("effect") != NO_EXECUTE or not tolerates(toleration, taint):
            continue
        if toleration.get("tolerationSeconds") is None:
            return None
        value = max(int(toleration["tolerationSeconds"]), 0)
        seconds = value if seconds is None else min(seconds, value)
    return (parse_time(taint.get("timeAdded")) or 0.0) + (seconds or 0)


def claim_eviction(claim: Obj, view: TaintView) -> Eviction | None:
    """When an allocated claim's untolerated NoExecute taints evict it (None: never, or unallocated)."""
    when: float | None = None
    reasons: set[TaintSource] = set()
    for result in claim_results(claim):
        tolerations = result.get("tolerations") or ()
        for source, taint in view.device_taints(result.get("driver", ""), result.get("pool", ""),
                                                result.get("device", "")):
            at = _taint_time(taint, tolerations)
            if at is None:
                continue
            reasons.add(source)
            when = at if when is None else min(when, at)
    if when is None:
        return None
    return Eviction(when, tuple(sorted(reasons, key=TaintSource.sort_key)))


def pod_eviction(pod: Obj, claim: Callable[[str], Obj | None], view: TaintView) -> Eviction | None:
    """When ``pod`` must be evicted (None: not at all); ``claim(name)`` looks up its namespace's claims."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    eviction: Eviction | None = None
    for pc in pod_claims(pod):
        if not pc.needed or not pc.claim_name:
            continue
        obj = claim(pc.claim_name)
        if obj is None or not (obj.get("status") or {}).get("allocation"):
            continue
        if pc.generated and not is_controlled_by(obj, pod):
            continue
        if not is_reserved_for(obj, pod):
            continue
        eviction = _merge(eviction, claim_eviction(obj, view))
    return eviction
