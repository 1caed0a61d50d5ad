"""The web view's documents, built from the allocator's own caches (pure, no I/O).

:func:`grid` is the page's whole state: one row per node (sorted by name, at most ``max_nodes``), one
cell per device of the newest generation of its pool (in natural name order, at most ``max_devices`` a
row), each cell in one
state, first match wins:

* ``unhealthy``: a taint ``draflow.dev/unhealthy`` or ``<driver>/unhealthy`` (the driver reported it);
* ``tainted``: any other taint, on the device or from a DeviceTaintRule selecting it;
* ``allocated``: in some claim's allocation, the API server's or one the allocator is still writing;
* ``partition``: not allocated itself, but it draws on a counter set (``consumesCounters``) that an
  allocated device of the same pool draws on too (a partition of the GPU is in use, or the whole GPU);
* ``free``.

A cell's ``group`` is its first counter set (a GPU and its partitions), so the page can draw them
together. Devices of slices that are not node-local (``allNodes``, ``nodeSelector``) are on the row ``*``.
:func:`device_detail` is what a click shows: the device, its taints and the claims using it with their
pods (``reservedFor``) and trace link. The cost is one pass over the slices, the claims and the rows'
devices; the HTTP side builds it at most once per interval, whatever the number of viewers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.devicetaints import is_unhealthy, rule_selects
from draflow_runtime.dra import allocation_node, allocation_results
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION

__all__ = ["STATES", "Claims", "Limits", "device_detail", "grid", "trace_id_of"]

STATES = ("free", "allocated", "partition", "tainted", "unhealthy")
SHARED_ROW = "*"
DeviceKey = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True)
class Limits:
    max_nodes: int = 200
    max_devices: int = 256  # per row
    max_pending: int = 100


@dataclass
class Claims:
    """Which claims hold which devices: the informer's allocations plus those being written."""

    by_device: dict[DeviceKey, list[str]] = field(default_factory=dict)
    writing: set[str] = field(default_factory=set)  # claim keys whose allocation is not written yet

    @classmethod
    def build(cls, claims: Iterable[Mapping[str, Any]],
              assumed: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> Claims:
        """``claims``: ResourceClaim objects; ``assumed``: (claim key, allocation) decided, in flight."""
        out = cls()
        for claim in claims:
            meta = claim.get("metadata") or {}
            key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            out._add(key, (claim.get("status") or {}).get("allocation"))
        for key, allocation in assumed:
            if out._add(key, allocation):
                out.writing.add(key)
        return out

    def _add(self, key: str, allocation: Mapping[str, Any] | None) -> bool:
        added = False
        for r in allocation_results(allocation):
            device = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            holders = self.by_device.setdefault(device, [])
            if key not in holders:
                holders.append(key)
                added = True
        return added


def trace_id_of(claim: Mapping[str, Any]) -> str:
    """The trace ID (32 hex digits) of the claim's ``draflow.dev/traceparent`` annotation, or ""."""
    value = ((claim.get("metadata") or {}).get("annotations") or {}).get(TRACEPARENT_ANNOTATION, "")
    parts = str(value).split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
        return parts[1].lower()
    return ""


def _pool_of(spec: Mapping[str, Any]) -> tuple[str, str, int]:
    pool = spec.get("pool") or {}
    return spec.get("driver", ""), pool.get("name", ""), int(pool.get("generation") or 0)


def current_slices(slices: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The slices at their pool's newest generation, sorted by name (a stable device order)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        driver, pool, generation = _pool_of(s.get("spec") or {})
        newest[(driver, pool)] = max(newest.get((driver, pool), generation), generation)
    current = [s for s in slices
               if _pool_of(s.get("spec") or {})[2] >= newest[_pool_of(s.get("spec") or {})[:2]]]
    return sorted(current, key=lambda s: str((s.get("metadata") or {}).get("name", "")))


def _row_of(spec: Mapping[str, Any], device: Mapping[str, Any]) -> str:
    return str(device.get("nodeName") or spec.get("nodeName") or SHARED_ROW)


def _taints(driver: str, pool: str, device: Mapping[str, Any],
            rules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    own = list(device.get("taints") or ())
    name = device.get("name", "")
    return own + [(r.get("spec") or {}).get("taint") or {}
                  for r in rules if rule_selects(r, driver, pool, name)]


def _counter_sets(device: Mapping[str, Any]) -> set[str]:
    return {c.get("counterSet", "") for c in device.get("consumesCounters") or ()}


def _state(driver: str, taints: Sequence[Mapping[str, Any]], held: bool, partition: bool) -> str:
    if any(is_unhealthy(driver, t) for t in taints):
        return "unhealthy"
    if taints:
        return "tainted"
    if held:
        return "allocated"
    return "partition" if partition else "free"


def _natural(name: str) -> tuple[Any, ...]:
    """``gpu-2`` before ``gpu-10``; ``gpu-1`` before ``gpu-1-part-0`` before ``gpu-2``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _cell_order(cell: Mapping[str, Any]) -> tuple[Any, ...]:
    return cell["driver"], cell["pool"], _natural(cell["device"])


def _node_rows(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for n in nodes:
        conditions = (n.get("status") or {}).get("conditions") or ()
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        name = (n.get("metadata") or {}).get("name", "")
        rows[name] = {"name": name, "ready": ready,
                      "unschedulable": bool((n.get("spec") or {}).get("unschedulable"))}
    return rows


def grid(slices: Iterable[Mapping[str, Any]], claims: Claims, nodes: Iterable[Mapping[str, Any]],
         rules: Sequence[Mapping[str, Any]], pending: Sequence[Mapping[str, Any]],
         limits: Limits = Limits()) -> dict[str, Any]:
    """The page's document (see the module docstring); ``pending``: the allocator's explanations
    (``claim``, ``pod``, ``time``, ``message``), newest first."""
    rows = _node_rows(nodes)
    current = current_slices(slices)
    # per pool: the counter sets an allocated device draws on
    busy: dict[tuple[str, str], set[str]] = {}
    for s in current:
        spec = s.get("spec") or {}
        driver, pool, _ = _pool_of(spec)
        for d in spec.get("devices") or ():
            if (driver, pool, d.get("name", "")) in claims.by_device:
                busy.setdefault((driver, pool), set()).update(_counter_sets(d))
    for s in current:
        spec = s.get("spec") or {}
        for d in spec.get("devices") or ():
            row = _row_of(spec, d)
            if row not in rows:
                rows[row] = {"name": row, "ready": row == SHARED_ROW, "unschedulable": False}
    names = sorted(rows, key=lambda n: (n == SHARED_ROW, n))
    shown = set(names[: limits.max_nodes])
    cells: dict[str, list[dict[str, Any]]] = {n: [] for n in shown}
    devices_total: dict[str, int] = dict.fromkeys(shown, 0)
    counts = dict.fromkeys(STATES, 0)
    for s in current:
        spec = s.get("spec") or {}
        driver, pool, _ = _pool_of(spec)
        for d in spec.get("devices") or ():
            row = _row_of(spec, d)
            name = d.get("name", "")
            holders = claims.by_device.get((driver, pool, name), [])
            partition = not holders and bool(_counter_sets(d) & busy.get((driver, pool), set()))
            state = _state(driver, _taints(driver, pool, d, rules), bool(holders), partition)
            counts[state] += 1
            if row not in shown:
                continue
            devices_total[row] += 1
            cell: dict[str, Any] = {"driver": driver, "pool": pool, "device": name, "state": state,
                                    "group": min(_counter_sets(d), default="")}
            if holders:
                cell["claims"] = holders
            cells[row].append(cell)
    out_rows = [{**rows[n], "devices": sorted(cells[n], key=_cell_order)[: limits.max_devices],
                 "devicesTotal": devices_total[n]} for n in names[: limits.max_nodes]]
    return {
        "nodes": out_rows,
        "nodesTotal": len(names),
        "counts": counts,
        "pending": list(pending[: limits.max_pending]),
        "pendingTotal": len(pending),
    }


def _claim_view(claim: Mapping[str, Any], key: str, writing: bool, jaeger_url: str) -> dict[str, Any]:
    meta = claim.get("metadata") or {}
    status = claim.get("status") or {}
    out: dict[str, Any] = {
        "claim": key,
        "uid": meta.get("uid", ""),
        "node": allocation_node(claim),
        "devices": [f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}"
                    for r in allocation_results(status.get("allocation"))],
        "pods": [f"{meta.get('namespace', '')}/{r.get('name', '')}" for r in status.get("reservedFor") or ()
                 if r.get("resource") == "pods"],
        "writing": writing,
    }
    trace_id = trace_id_of(claim)
    if trace_id:
        out["traceID"] = trace_id
        if jaeger_url:
            out["traceURL"] = f"{jaeger_url.rstrip('/')}/trace/{trace_id}"
    return out


def device_detail(key: DeviceKey, slices: Iterable[Mapping[str, Any]], claims: Claims,
                  claim_objects: Mapping[str, Mapping[str, Any]], rules: Sequence[Mapping[str, Any]],
                  jaeger_url: str = "") -> dict[str, Any] | None:
    """One device: node, state, taints, attributes, capacity and the claims using it; None if the
    newest generation of its pool has no such device. ``claim_objects``: claim key -> ResourceClaim."""
    driver, pool, name = key
    found: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None
    busy: set[str] = set()
    for s in current_slices(slices):
        spec = s.get("spec") or {}
        if _pool_of(spec)[:2] != (driver, pool):
            continue
        for d in spec.get("devices") or ():
            if d.get("name") == name:
                found = (spec, d)
            if (driver, pool, d.get("name", "")) in claims.by_device:
                busy |= _counter_sets(d)
    if found is None:
        return None
    spec, device = found
    holders = claims.by_device.get(key, [])
    taints = _taints(driver, pool, device, rules)
    partition = not holders and bool(_counter_sets(device) & busy)
    views = []
    for claim_key in holders:
        claim = claim_objects.get(claim_key)
        if claim is None:  # decided and being written; the informer has not seen the claim's write yet
            views.append({"claim": claim_key, "writing": True, "devices": [], "pods": [], "node": ""})
        else:
            views.append(_claim_view(claim, claim_key, claim_key in claims.writing, jaeger_url))
    return {
        "driver": driver, "pool": pool, "device": name, "node": _row_of(spec, device),
        "state": _state(driver, taints, bool(holders), partition),
        "taints": [{k: t.get(k) for k in ("key", "value", "effect") if t.get(k)} for t in taints],
        "attributes": {k: next(iter(v.values()), "") if isinstance(v, Mapping) else v
                       for k, v in (device.get("attributes") or {}).items()},
        "capacity": {k: (v or {}).get("value", "") for k, v in (device.get("capacity") or {}).items()},
        "counterSets": sorted(_counter_sets(device)),
        "claims": views,
    }
