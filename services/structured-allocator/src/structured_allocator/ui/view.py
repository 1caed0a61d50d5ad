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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.devicetaints import rule_selects
from draflow_runtime.dra import allocation_node, allocation_results
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION

from .prepared import SHARED_ROW, PreparedSlice, SliceCache, counter_sets, row_of, taint_state

__all__ = ["STATES", "Claims", "Limits", "device_detail", "grid", "trace_id_of"]

STATES = ("free", "allocated", "partition", "tainted", "unhealthy")
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


def _rule_taints(driver: str, pool: str, name: str,
                 rules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [(r.get("spec") or {}).get("taint") or {} for r in rules if rule_selects(r, driver, pool, name)]


def _pool_rules(driver: str, pool: str, rules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rules that may select a device of the pool (a rule without a selector selects nothing)."""
    out = []
    for r in rules:
        selector = (r.get("spec") or {}).get("deviceSelector")
        if selector is not None and selector.get("driver") in (None, driver) and \
                selector.get("pool") in (None, pool):
            out.append(r)
    return out


def _state(own: str, rule_taints: Sequence[Mapping[str, Any]], driver: str, held: bool,
           partition: bool) -> str:
    """``own``: the :func:`.prepared.taint_state` of the device's own taints."""
    ruled = taint_state(driver, rule_taints) if rule_taints else ""
    if "unhealthy" in (own, ruled):
        return "unhealthy"
    if own or ruled:
        return "tainted"
    if held:
        return "allocated"
    return "partition" if partition else "free"


def _node_rows(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for n in nodes:
        conditions = (n.get("status") or {}).get("conditions") or ()
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        name = (n.get("metadata") or {}).get("name", "")
        rows[name] = {"name": name, "ready": ready,
                      "unschedulable": bool((n.get("spec") or {}).get("unschedulable"))}
    return rows


def _current(slices: Iterable[Mapping[str, Any]], cache: SliceCache) -> list[PreparedSlice]:
    prepared = [cache.get(s) for s in slices]
    newest: dict[tuple[str, str], int] = {}
    for p in prepared:
        newest[(p.driver, p.pool)] = max(newest.get((p.driver, p.pool), p.generation), p.generation)
    cache.retain({p.name for p in prepared})
    return sorted((p for p in prepared if p.generation >= newest[(p.driver, p.pool)]), key=lambda p: p.name)


def grid(slices: Iterable[Mapping[str, Any]], claims: Claims, nodes: Iterable[Mapping[str, Any]],
         rules: Sequence[Mapping[str, Any]], pending: Sequence[Mapping[str, Any]],
         limits: Limits = Limits(), cache: SliceCache | None = None) -> dict[str, Any]:
    """The page's document (see the module docstring); ``pending``: the allocator's explanations
    (``claim``, ``pod``, ``time``, ``message``), newest first. ``cache``: keep one across builds so that
    each slice version is prepared once (:mod:`.prepared`)."""
    current = _current(slices, cache if cache is not None else SliceCache())
    by_device = claims.by_device
    busy: dict[tuple[str, str], set[str]] = {}  # per pool: the counter sets an allocated device draws on
    rows = _node_rows(nodes)
    for p in current:
        for d in p.devices:
            if (p.driver, p.pool, d.name) in by_device:
                busy.setdefault((p.driver, p.pool), set()).update(d.counter_sets)
            if d.row not in rows:
                rows[d.row] = {"name": d.row, "ready": d.row == SHARED_ROW, "unschedulable": False}
    names = sorted(rows, key=lambda n: (n == SHARED_ROW, n))
    shown = set(names[: limits.max_nodes])
    cells: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {n: [] for n in shown}
    devices_total: dict[str, int] = dict.fromkeys(shown, 0)
    counts = dict.fromkeys(STATES, 0)
    for p in current:
        pool_busy = busy.get((p.driver, p.pool), set())
        pool_rules = _pool_rules(p.driver, p.pool, rules) if rules else []
        for d in p.devices:
            holders = by_device.get((p.driver, p.pool, d.name))
            extra = _rule_taints(p.driver, p.pool, d.name, pool_rules) if pool_rules else []
            state = _state(d.own, extra, p.driver, bool(holders),
                           not holders and not pool_busy.isdisjoint(d.counter_sets))
            counts[state] += 1
            if d.row not in shown:
                continue
            devices_total[d.row] += 1
            cell: dict[str, Any] = {"driver": p.driver, "pool": p.pool, "device": d.name, "state": state,
                                    "group": d.group}
            if holders:
                cell["claims"] = holders
            cells[d.row].append(((p.driver, p.pool, d.order), cell))
    out_rows = []
    for n in names[: limits.max_nodes]:
        ordered = [c for _, c in sorted(cells[n], key=lambda kc: kc[0])[: limits.max_devices]]
        out_rows.append({**rows[n], "devices": ordered, "devicesTotal": devices_total[n]})
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
                busy |= counter_sets(d)
    if found is None:
        return None
    spec, device = found
    holders = claims.by_device.get(key, [])
    own = list(device.get("taints") or ())
    extra = _rule_taints(driver, pool, name, rules)
    partition = not holders and bool(counter_sets(device) & busy)
    views = []
    for claim_key in holders:
        claim = claim_objects.get(claim_key)
        if claim is None:  # decided and being written; the informer has not seen the claim's write yet
            views.append({"claim": claim_key, "writing": True, "devices": [], "pods": [], "node": ""})
        else:
            views.append(_claim_view(claim, claim_key, claim_key in claims.writing, jaeger_url))
    return {
        "driver": driver, "pool": pool, "device": name, "node": row_of(spec, device),
        "state": _state(taint_state(driver, own), extra, driver, bool(holders), partition),
        "taints": [{k: t.get(k) for k in ("key", "value", "effect") if t.get(k)} for t in own + extra],
        "attributes": {k: next(iter(v.values()), "") if isinstance(v, Mapping) else v
                       for k, v in (device.get("attributes") or {}).items()},
        "capacity": {k: (v or {}).get("value", "") for k, v in (device.get("capacity") or {}).items()},
        "counterSets": sorted(counter_sets(device)),
        "claims": views,
    }
