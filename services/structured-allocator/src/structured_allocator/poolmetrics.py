"""What the allocator knows about pools and waiting claims, as Prometheus gauges read at scrape time.

Nothing is updated per event: :class:`AllocatorCollector` reads the leader's informers and assume cache
when ``/metrics`` is scraped (on the event loop, like every other reader of that state). A standby, or a
leader whose informers have not synced yet, exports the families with no samples.

Per pool (labels ``driver``, ``pool_name``, ``node_name`` as kube-state-metrics' ``kube_resourceslice_*``
name them; ``node_name`` is empty unless every slice of the pool names the same node), over the slices at
the pool's newest ``pool.generation``:

* ``draflow_resourcepool_devices_total``: devices published;
* ``draflow_resourcepool_devices_allocated``: devices in some claim's effective allocation (the API
  server's, or one the allocator decided and is still writing); admin-access results do not count;
* ``draflow_resourcepool_devices_tainted``: devices with a ``NoSchedule``/``NoExecute`` taint of their own
  or from a DeviceTaintRule (KEP-5677's ``unavailableDevices``);
* ``draflow_resourcepool_devices_unhealthy``: devices with the ``draflow.dev/unhealthy`` taint (the
  slice-publisher adds it when the driver reports the device unhealthy);
* ``draflow_resourcepool_devices_free``: devices neither allocated nor tainted (KEP-5677's
  ``availableDevices`` subtracts both counts, so it is lower when a device is both);
* ``draflow_resourcepool_device_taints`` (``key``, ``effect`` added): devices carrying each taint, e.g.
  ``key="draflow.dev/driver-unavailable"`` while a driver is gone.

Claims waiting for the allocator (an unbound pod with one of its scheduler names references them, they
exist, and they have no effective allocation):

* ``draflow_resourceclaims_pending``: how many;
* ``draflow_resourceclaims_pending_oldest_timestamp_seconds`` (``namespace``): since when (Unix time) the
  longest-waiting claim of the namespace waits. A claim waits since the later of its creation and the
  creation of the oldest such pod, so the number survives a leader change. One series per namespace with
  waiting claims, not one per claim (the claims themselves: the allocator's ``/explain``).

:class:`AllocationLatency` is the one event-driven part: ``draflow_allocator_claim_allocation_seconds``
(by ``driver``), from the moment this leader saw a claim waiting to the informer event that shows it
allocated. Claims already waiting when the leadership term's informers synced are not observed (their
start is unknown), nor are claims allocated for pods that already have a node (allocate requests).
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from draflow_runtime.dra import allocation_results, claim_names
from draflow_runtime.metrics import registered_collector

from .core.pools import PreparedSlice
from .state import ClusterState

__all__ = [
    "ALLOCATION_SECONDS",
    "POOL_METRICS",
    "AllocationLatency",
    "AllocatorCollector",
    "PoolCounts",
    "oldest_pending",
    "pending_claims",
    "pool_counts",
]

UNHEALTHY_KEY = "draflow.dev/unhealthy"  # slice-publisher's taint for a device its driver calls unhealthy
UNAVAILABLE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
POOL_LABELS = ["driver", "pool_name", "node_name"]

ALLOCATION_SECONDS = registered_collector(
    Histogram, "draflow_allocator_claim_allocation_seconds",
    "From the allocator seeing a claim wait for allocation to its informer showing the claim allocated.",
    ["driver"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)


@dataclass
class PoolCounts:
    """The device counts of one pool (see the module docstring)."""

    driver: str
    pool: str
    node: str = ""
    total: int = 0
    allocated: int = 0
    tainted: int = 0
    unhealthy: int = 0
    free: int = 0
    taints: Tally[tuple[str, str]] = field(default_factory=Tally)  # (key, effect) -> devices

    @property
    def labels(self) -> list[str]:
        return [self.driver, self.pool, self.node]


def _in_use(allocations: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    used: set[tuple[str, str, str]] = set()
    for allocation in allocations:
        for r in allocation_results(allocation):
            if not r.get("adminAccess"):
                used.add((r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
    return used


def pool_counts(slices: Iterable[PreparedSlice],
                allocations: Iterable[Mapping[str, Any]]) -> list[PoolCounts]:
    """Counts per pool, sorted by (driver, pool), from the slices at each pool's newest generation and
    the effective allocations (``status.allocation`` objects). Pure."""
    newest: dict[tuple[str, str], tuple[int, list[PreparedSlice]]] = {}
    for s in slices:
        known = newest.get(s.pool_id)
        if known is None or s.generation > known[0]:
            newest[s.pool_id] = (s.generation, [s])
        elif s.generation == known[0]:
            known[1].append(s)
    used = _in_use(allocations)
    out = []
    for (driver, pool), (_, members) in sorted(newest.items()):
        nodes = {s.node_name or "" for s in members}
        counts = PoolCounts(driver, pool, nodes.pop() if len(nodes) == 1 else "")
        allocated = tainted = unhealthy = both = 0
        for s in members:
            counts.total += len(s.devices)
            for d in s.devices:
                in_use = (driver, pool, d.name) in used
                allocated += in_use
                if not d.taints:  # the common case: no set, no loop
                    continue
                keys = {(t.get("key", ""), t.get("effect", "")) for t in d.taints}
                counts.taints.update(keys)
                if any(effect in UNAVAILABLE_EFFECTS for _, effect in keys):
                    tainted += 1
                    both += in_use
                unhealthy += any(key == UNHEALTHY_KEY for key, _ in keys)
        counts.allocated, counts.tainted, counts.unhealthy = allocated, tainted, unhealthy
        counts.free = counts.total - allocated - tainted + both
        out.append(counts)
    return out


def _timestamp(obj: Mapping[str, Any]) -> float | None:
    raw = (obj.get("metadata") or {}).get("creationTimestamp")
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pending_claims(state: ClusterState) -> dict[tuple[str, str], tuple[str, float | None]]:
    """(namespace, claim name) -> (claim uid, pending since as Unix time or None) for every claim waiting
    for this allocator (see the module docstring)."""
    oldest_pod: dict[tuple[str, str], float | None] = {}
    for pod in state.pods.list():
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or not state.ours(pod):
            continue
        created = _timestamp(pod)
        for name in claim_names(pod):
            key = (meta.get("namespace", ""), name)
            seen = oldest_pod.get(key, created)
            oldest_pod[key] = min(seen, created) if seen is not None and created is not None else None
    out: dict[tuple[str, str], tuple[str, float | None]] = {}
    for (ns, name), pod_created in oldest_pod.items():
        claim = state.claims.get(f"{ns}/{name}")
        if claim is None:
            continue
        uid = claim["metadata"].get("uid", "")
        if state.assume.allocation(uid) is not None:
            continue
        created = _timestamp(claim)
        since = max(created, pod_created) if created is not None and pod_created is not None else None
        out[(ns, name)] = (uid, since)
    return out


def oldest_pending(pending: Mapping[tuple[str, str], tuple[str, float | None]]) -> dict[str, float]:
    """Namespace -> the earliest "pending since" of its claims in ``pending`` (:func:`pending_claims`);
    claims whose start is unknown do not count. Pure."""
    oldest: dict[str, float] = {}
    for (ns, _), (_, since) in pending.items():
        if since is not None and (ns not in oldest or since < oldest[ns]):
            oldest[ns] = since
    return oldest


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _families() -> dict[str, GaugeMetricFamily]:
    return {
        "total": _gauge("draflow_resourcepool_devices_total",
                        "Devices in the pool's slices at its newest generation.", POOL_LABELS),
        "allocated": _gauge("draflow_resourcepool_devices_allocated",
                            "Devices of the pool in some claim's allocation (in-flight writes included).",
                            POOL_LABELS),
        "tainted": _gauge("draflow_resourcepool_devices_tainted",
                          "Devices of the pool with a NoSchedule or NoExecute taint (own or from a rule).",
                          POOL_LABELS),
        "unhealthy": _gauge("draflow_resourcepool_devices_unhealthy",
                            "Devices of the pool tainted draflow.dev/unhealthy (the driver reports them so).",
                            POOL_LABELS),
        "free": _gauge("draflow_resourcepool_devices_free",
                       "Devices of the pool neither allocated nor tainted NoSchedule/NoExecute.",
                       POOL_LABELS),
        "taints": _gauge("draflow_resourcepool_device_taints",
                         "Devices of the pool carrying a taint, by taint key and effect.",
                         [*POOL_LABELS, "key", "effect"]),
        "pending": _gauge("draflow_resourceclaims_pending",
                          "Claims that exist, are not allocated and are referenced by an unbound pod this "
                          "allocator schedules.", []),
        "oldest": _gauge("draflow_resourceclaims_pending_oldest_timestamp_seconds",
                         "Unix time since which the longest-waiting claim of the namespace waits for "
                         "allocation (later of its and its oldest waiting pod's creation).", ["namespace"]),
    }


class AllocatorCollector(Collector):
    """The gauges of the module docstring, read from ``source()`` (the current leader's state or None)."""

    def __init__(self) -> None:
        self.source: Callable[[], ClusterState | None] = lambda: None

    def describe(self) -> Iterable[Metric]:
        return list(_families().values())

    def collect(self) -> Iterator[Metric]:
        families = _families()
        state = self.source()
        if state is not None and state.synced:
            self._fill(state, families)
        yield from families.values()

    @staticmethod
    def _fill(state: ClusterState, f: dict[str, GaugeMetricFamily]) -> None:
        for p in pool_counts(state.slices, state.assume.allocations()):
            for name in ("total", "allocated", "tainted", "unhealthy", "free"):
                f[name].add_metric(p.labels, getattr(p, name))
            for (key, effect), n in sorted(p.taints.items()):
                f["taints"].add_metric([*p.labels, key, effect], n)
        pending = pending_claims(state)
        f["pending"].add_metric([], len(pending))
        for ns, since in sorted(oldest_pending(pending).items()):
            f["oldest"].add_metric([ns], since)


POOL_METRICS = AllocatorCollector()
REGISTRY.register(POOL_METRICS)


class AllocationLatency:
    """Feeds ``draflow_allocator_claim_allocation_seconds`` from one leadership term's informers (see the
    module docstring). Attach before the informers start."""

    def __init__(self, state: ClusterState, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self.clock = clock
        self.started: dict[str, float] = {}  # claim uid -> when this term saw it waiting
        self._unknown: set[str] = set()  # waiting when the informers synced: start unknown
        self._baseline = False
        state.pods.add_handler(self._on_pod)
        state.claims.add_handler(self._on_claim)

    def _ready(self) -> bool:
        if not self.state.synced:
            return False
        if not self._baseline:
            self._unknown = {uid for uid, _ in pending_claims(self.state).values()}
            self._baseline = True
        return True

    def _waiting(self, uid: str) -> None:
        if uid not in self._unknown and uid not in self.started and self.state.assume.allocation(uid) is None:
            self.started[uid] = self.clock()

    def _on_pod(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None or not self._ready() or not self.state.ours(new):
            return
        ns = new["metadata"].get("namespace", "")
        for name in claim_names(new):
            claim = self.state.claims.get(f"{ns}/{name}")
            if claim is not None and not (claim.get("status") or {}).get("allocation"):
                self._waiting(claim["metadata"].get("uid", ""))

    def _on_claim(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if not self._ready():
            return
        claim = new if new is not None else old
        assert claim is not None
        meta = claim["metadata"]
        uid = meta.get("uid", "")
        allocation = (new.get("status") or {}).get("allocation") if new is not None else None
        if new is None or allocation:
            self._unknown.discard(uid)
            started = self.started.pop(uid, None)
            if started is not None and allocation:
                elapsed = max(0.0, self.clock() - started)
                for driver in sorted({r.get("driver", "") for r in allocation_results(allocation)} or {""}):
                    ALLOCATION_SECONDS.labels(driver).observe(elapsed)
            return
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if any(self.state.ours(p) for p in self.state.pods_using_claim(key)):
            self._waiting(uid)
