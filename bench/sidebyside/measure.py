"""What is measured: process CPU and memory from /proc, the API server's request counters, and the pods'
create and bind times (the throughput as scheduler_perf's collector computes it)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.errors import Gone, TransportError
from draflow_runtime.kube import PODS, KubeClient

TICK = os.sysconf("SC_CLK_TCK")
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
_SAMPLE = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


# -- /proc ---------------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process (its threads included, not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat)


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the highest resident set size the process ever had."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):
            out[name] = cpu_seconds(pid)
    return out


# -- API server requests -----------------------------------------------------------------------------

def parse_requests(text: str) -> Counter[tuple[str, str, str]]:
    """``apiserver_request_total`` summed by (verb, resource, subresource) from a /metrics page."""
    out: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        out[(labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))] += int(
            float(m["value"]))
    return out


def writes(before: Counter[tuple[str, str, str]], after: Counter[tuple[str, str, str]],
           ) -> Counter[tuple[str, str, str]]:
    """Write requests between two snapshots, by (verb, resource, subresource)."""
    return Counter({k: after[k] - before.get(k, 0) for k in after
                    if k[0] in WRITE_VERBS and after[k] - before.get(k, 0) > 0})


# -- pods --------------------------------------------------------------------------------------------

def scheduler_perf_throughput(samples: list[tuple[float, int]], interval: float = 1.0) -> float:
    """Average pods/s as scheduler_perf's ``throughputCollector`` computes it.

    ``samples``: (time, pods bound so far) taken every ``interval``. Ticks before the first bound pod are
    ignored; the first tick with a bound pod only starts the clock; a tick with nothing new is skipped and
    the next one with progress records its rate once per interval it covers; the result is the mean of
    the recorded rates (NaN when nothing was recorded).
    """
    rates: list[float] = []
    started = False
    last_t, last_n, skipped = 0.0, 0, 0
    for t, n in samples:
        if n == 0:
            continue
        if not started:
            started, last_t, last_n = True, t, n
            continue
        if n == last_n:
            skipped += 1
            continue
        rate = (n - last_n) / (t - last_t)
        rates.extend([rate] * (skipped + 1))
        last_t, last_n, skipped = t, n, 0
    return sum(rates) / len(rates) if rates else float("nan")


@dataclass
class PodTracker:
    """Watches the pods of one namespace: when each was created (by us) and first seen bound."""

    kube: KubeClient
    namespace: str
    on_bound: Callable[[dict[str, Any]], None] | None = None
    created: dict[str, float] = field(default_factory=dict)  # name -> monotonic time the create returned
    create_started: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)  # name -> monotonic time first seen bound
    samples: list[tuple[float, int]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        listed = await self.kube.list(PODS, namespace=self.namespace)
        for pod in listed.get("items") or ():
            self._see(pod)
        rv = listed["metadata"]["resourceVersion"]
        self._tasks = [asyncio.create_task(self._watch(rv)), asyncio.create_task(self._sample())]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _see(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if pod["spec"].get("nodeName") and name not in self.bound:
            self.bound[name] = time.monotonic()
            self._changed.set()
            if self.on_bound is not None:
                self.on_bound(pod)

    async def _watch(self, rv: str) -> None:
        while True:
            try:
                async for etype, obj in self.kube.watch(PODS, namespace=self.namespace, resource_version=rv,
                                                        timeout_seconds=300):
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype in ("ADDED", "MODIFIED"):
                        self._see(obj)
            except (Gone, TransportError):
                listed = await self.kube.list(PODS, namespace=self.namespace)
                for pod in listed.get("items") or ():
                    self._see(pod)
                rv = listed["metadata"]["resourceVersion"]

    async def _sample(self) -> None:
        next_tick = time.monotonic()
        while True:
            next_tick += 1.0
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
            self.samples.append((time.monotonic(), len(self.bound)))

    async def wait_bound(self, names: set[str], stall: float) -> bool:
        """Until every pod in ``names`` is bound (True), or no new pod got bound for ``stall`` s (False)."""
        last_progress, last_count = time.monotonic(), -1
        while True:
            done = sum(1 for n in names if n in self.bound)
            if done >= len(names):
                return True
            if done != last_count:
                last_progress, last_count = time.monotonic(), done
            elif time.monotonic() - last_progress > stall:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=1.0)

    def latencies(self, names: set[str]) -> list[float]:
        return sorted(self.bound[n] - self.created[n] for n in names if n in self.bound and n in self.created)


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
