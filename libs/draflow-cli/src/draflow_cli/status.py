"""``draflow status``: devices per node and pool — total, allocated, tainted, unhealthy, free.

Read from the API server only (ResourceSlices and ResourceClaims), so it shows the truth, not what a
service believes. The counting is the pure :func:`summarize`:

- a pool's devices are those of its slices at the pool's highest generation (lower generations are
  obsolete, as for the allocator);
- allocated = the device appears in some claim's ``status.allocation.devices.results``
  (``driver``, ``pool``, ``device``);
- tainted = the device has at least one taint; unhealthy = a taint with key ``draflow.dev/unhealthy``
  or ``<driver>/unhealthy``;
- free = neither allocated nor tainted.

Below it, the structured-allocator's own numbers per driver and pool (a ResourcePoolStatusRequest,
:mod:`.poolstatus`): they count allocations it is still writing and say which devices are unavailable
(NoSchedule/NoExecute taints, DeviceTaintRules), plus partition and shareable summaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.devicetaints import is_unhealthy
from draflow_runtime.dra import claim_results
from draflow_runtime.kube import RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient

from . import poolstatus
from .kubeopts import dump, structured
from .table import render


@dataclass
class PoolStatus:
    node: str
    driver: str
    pool: str
    generation: int = 0
    devices: set[str] = field(default_factory=set)
    allocated: set[str] = field(default_factory=set)
    tainted: set[str] = field(default_factory=set)
    unhealthy: set[str] = field(default_factory=set)

    @property
    def free(self) -> int:
        return len(self.devices - self.allocated - self.tainted)

    def row(self) -> list[object]:
        return [self.node, self.driver, self.pool, len(self.devices), len(self.allocated),
                len(self.tainted), len(self.unhealthy), self.free]

    def as_dict(self) -> dict[str, Any]:
        """``-o json|yaml``: the counts and the device names behind them."""
        return {
            "node": self.node, "driver": self.driver, "pool": self.pool, "generation": self.generation,
            "devices": len(self.devices), "allocated": len(self.allocated), "tainted": len(self.tainted),
            "unhealthy": len(self.unhealthy), "free": self.free,
            "allocatedDevices": sorted(self.allocated), "taintedDevices": sorted(self.tainted),
            "unhealthyDevices": sorted(self.unhealthy),
        }


def _placement(spec: Mapping[str, Any], device: Mapping[str, Any]) -> str:
    if device.get("nodeName"):
        return str(device["nodeName"])
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    if spec.get("allNodes") or device.get("allNodes"):
        return "<all nodes>"
    return "<node selector>"


def summarize(slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]) -> list[PoolStatus]:
    """One :class:`PoolStatus` per (node, driver, pool), sorted by node, driver, pool."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
        newest[key] = max(newest.get(key, 0), int((spec.get("pool") or {}).get("generation", 0)))
    in_use: set[tuple[str, str, str]] = set()
    for c in claims:
        for r in claim_results(c):
            in_use.add((r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
    pools: dict[tuple[str, str, str], PoolStatus] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        generation = int((spec.get("pool") or {}).get("generation", 0))
        if generation < newest[(driver, pool)]:
            continue
        for device in spec.get("devices") or ():
            name = device.get("name", "")
            node = _placement(spec, device)
            status = pools.setdefault((node, driver, pool), PoolStatus(node, driver, pool, generation))
            status.devices.add(name)
            if (driver, pool, name) in in_use:
                status.allocated.add(name)
            taints = device.get("taints") or ()
            if taints:
                status.tainted.add(name)
            if any(is_unhealthy(driver, t) for t in taints):
                status.unhealthy.add(name)
    return [pools[k] for k in sorted(pools)]


HEADERS = ["NODE", "DRIVER", "POOL", "DEVICES", "ALLOCATED", "TAINTED", "UNHEALTHY", "FREE"]
WIDE_HEADERS = [*HEADERS, "GENERATION", "UNHEALTHY DEVICES"]


def claim_counts(claims: list[Mapping[str, Any]]) -> dict[str, int]:
    allocated = sum(1 for c in claims if (c.get("status") or {}).get("allocation"))
    return {"total": len(claims), "allocated": allocated, "pending": len(claims) - allocated}


def format_status(pools: list[PoolStatus], claims: list[Mapping[str, Any]], *, wide: bool = False) -> str:
    if not pools:
        return "no ResourceSlices published"
    rows: list[list[object]] = [p.row() for p in pools]
    totals = [sum(int(r[i]) for r in rows) for i in range(3, 8)]  # type: ignore[call-overload]
    rows.append(["TOTAL", f"{len({p.driver for p in pools})} driver(s)", f"{len(pools)} pool(s)", *totals])
    if wide:
        for row, p in zip(rows, pools, strict=False):
            row.extend([p.generation, ",".join(sorted(p.unhealthy)) or "-"])
        rows[-1].extend(["", ""])
    counts = claim_counts(claims)
    nodes = {p.node for p in pools}
    return (
        render(WIDE_HEADERS if wide else HEADERS, rows)
        + f"\n\n{len(nodes)} node(s); claims: {counts['total']} total, {counts['allocated']} allocated, "
        f"{counts['pending']} pending"
    )


def status_doc(pools: list[PoolStatus], claims: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``-o json|yaml``: the API server's view (the allocator's pool status is table-only)."""
    return {"pools": [p.as_dict() for p in pools], "claims": claim_counts(claims)}


async def run(kube: KubeClient, pool_status_wait: float = 5.0, output: str = "table") -> str:
    """The table of the API server's view, then the structured-allocator's answer per driver
    (:mod:`.poolstatus`; skipped with ``pool_status_wait < 0`` and for ``-o json|yaml``)."""
    slices = (await kube.list(RESOURCE_SLICES)).get("items") or []
    claims = (await kube.list(RESOURCE_CLAIMS)).get("items") or []
    pools = summarize(slices, claims)
    if structured(output):
        return dump(status_doc(pools, claims), output)
    out = format_status(pools, claims, wide=output == "wide")
    if pool_status_wait >= 0:
        drivers = {(s.get("spec") or {}).get("driver", "") for s in slices} - {""}
        section = await poolstatus.run(kube, drivers, pool_status_wait)
        if section:
            out += "\n\n" + section
    return out
