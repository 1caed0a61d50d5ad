"""``draflow status``, second part: the pool status the structured-allocator reports.

For every driver that publishes ResourceSlices the CLI creates a ResourcePoolStatusRequest
(``resource.k8s.io/v1alpha3``, DRAResourcePoolStatus), waits up to ``wait`` seconds for its ``status``,
prints it and deletes the request again. The numbers are the allocator's: they include allocations it
has decided and is still writing, so they can be ahead of the claims the first table counts. Without an
answer (gate off, resource not served, no allocator running) the section says so instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.errors import ApiError, NotFound
from draflow_runtime.kube import RESOURCE_POOL_STATUS_REQUESTS, KubeClient

from .table import render

__all__ = ["HEADERS", "ask", "format_answers", "run"]

HEADERS = ["DRIVER", "POOL", "NODE", "SLICES", "DEVICES", "ALLOCATED", "UNAVAILABLE", "AVAILABLE"]
MAX_LIMIT = 1000
POLL = 0.2


async def ask(kube: KubeClient, driver: str, wait: float) -> dict[str, Any] | None:
    """Create a request for ``driver``, return its status once answered (None after ``wait`` s); the
    request is deleted in any case. Raises ``NotFound`` when the API server does not serve the kind."""
    created = await kube.create(RESOURCE_POOL_STATUS_REQUESTS, {
        "apiVersion": RESOURCE_POOL_STATUS_REQUESTS.api_version, "kind": RESOURCE_POOL_STATUS_REQUESTS.kind,
        "metadata": {"generateName": "draflow-status-"}, "spec": {"driver": driver, "limit": MAX_LIMIT}})
    name = created["metadata"]["name"]
    try:
        deadline = time.monotonic() + wait
        while True:
            status = (await kube.get(RESOURCE_POOL_STATUS_REQUESTS, name)).get("status")
            if status:
                return dict(status)
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(POLL)
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(RESOURCE_POOL_STATUS_REQUESTS, name)


def _condition(status: Mapping[str, Any]) -> Mapping[str, Any]:
    return next(iter(status.get("conditions") or ()), {})


def _details(pool: Mapping[str, Any]) -> list[str]:
    out = []
    if pool.get("validationError"):
        out.append(f"  {pool['poolName']}: {pool['validationError']}")
    parts = [f"{p['type']} {p['allocatable']}/{p['total']}" for p in pool.get("partitionSummary") or ()]
    if parts:
        attrs = sorted({p["attribute"] for p in pool["partitionSummary"]})
        out.append(f"  {pool['poolName']}: partitions by {', '.join(attrs)} (allocatable/total): "
                   + ", ".join(parts))
    shareable = pool.get("shareableSummary")
    if shareable:
        caps = [f"{c['name']} {c['consumed']}/{c['total']} consumed, {c['available']} available"
                for c in shareable.get("capacity") or ()]
        out.append(f"  {pool['poolName']}: shareable devices {shareable['fullyAvailableDevices']} fully, "
                   f"{shareable['partiallyAvailableDevices']} partially available"
                   + (f"; {'; '.join(caps)}" if caps else ""))
    return out


def _num(value: Any) -> object:
    return value if isinstance(value, int) else "-"


def format_answers(answers: Mapping[str, Mapping[str, Any] | None], wait: float) -> str:
    """The table of every answered driver's pools, details below it, then the drivers without answer."""
    rows: list[list[object]] = []
    details: list[str] = []
    notes: list[str] = []
    for driver in sorted(answers):
        status = answers[driver]
        if status is None:
            notes.append(f"{driver}: no answer within {wait:g}s (is the structured-allocator running, "
                         "with DRAResourcePoolStatus on?)")
            continue
        condition = _condition(status)
        if condition.get("type") == "Failed":
            notes.append(f"{driver}: failed: {condition.get('message', '')}")
            continue
        pools = list(status.get("pools") or ())
        for p in pools:
            rows.append([driver, p["poolName"], p.get("nodeName") or "-", _num(p.get("resourceSliceCount")),
                         _num(p.get("totalDevices")), _num(p.get("allocatedDevices")),
                         _num(p.get("unavailableDevices")), _num(p.get("availableDevices"))])
            details.extend(_details(p))
        if len(pools) < int(status.get("poolCount") or 0):
            notes.append(f"{driver}: {len(pools)} of {status['poolCount']} pools shown")
    out = [render(HEADERS, rows)] if rows else []
    if details:
        out.append("\n".join(details))
    if notes:
        out.append("\n".join(notes))
    return "\n\n".join(out)


async def run(kube: KubeClient, drivers: Iterable[str], wait: float) -> str:
    """The section for these drivers (their requests are asked at once)."""
    drivers = sorted(set(drivers))
    if not drivers:
        return ""
    title = "== pool status (answered by the structured-allocator, allocations being written included)"
    try:
        answers = await asyncio.gather(*(ask(kube, d, wait) for d in drivers))
    except NotFound:
        return f"{title}\nResourcePoolStatusRequests ({RESOURCE_POOL_STATUS_REQUESTS.api_version}) are not " \
               "served: DRAResourcePoolStatus is off"
    return f"{title}\n{format_answers(dict(zip(drivers, answers, strict=True)), wait)}"
