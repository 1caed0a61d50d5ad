"""One workload on one stack, on a fresh environment: set up, initial state, the measured phase, the check.

Order as in scheduler_perf: the stack runs first; then Nodes, ResourceSlices, the DeviceClass and the
template; claims allocated directly (``allocResourceClaims``: a random node with a free device, the
allocation written into the claim's status, no pod, no reservation, no finalizer); for the shared-claim
case the initial pods (scheduled by the stack, waited for, not measured) and the measured claims; then the
measured pods, with the counters read just before the first create and after the last bind (burst) or at
the end of the window (steady state).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.admin import ssl_context
from draflow_testenv.environment import Environment
from sidebyside import apiprofile, objects, pyspy, stacks
from sidebyside.measure import (
    PodTracker,
    cpu_snapshot,
    parse_requests,
    peak_rss_mib,
    scheduler_perf_throughput,
    writes,
)
from sidebyside.verify import Verdict, verify
from sidebyside.workloads import Workload

log = logging.getLogger("sidebyside")
CREATORS = 30  # scheduler_perf's pod creator runs 30 at once
INIT, TEST = "init", "test"
HARNESS = "harness"  # the load generator and pod tracker: this process, on the same two cores


@dataclass
class Result:
    workload: str
    stack: str
    pods: int = 0  # measured pods bound
    expected: int = 0
    perf_throughput: float = float("nan")  # scheduler_perf's SchedulingThroughput average
    span: float = float("nan")  # first create -> last bound (burst) or the window (steady)
    latencies: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # component -> CPU seconds in the measured phase
    rss: dict[str, float] = field(default_factory=dict)  # component -> peak RSS MiB
    writes: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # the stacks' own
    client_writes: int = 0
    load: float = float("nan")  # 1-minute load average when the measured phase started
    verdict: Verdict = field(default_factory=Verdict)
    note: str = ""

    @property
    def pods_per_s(self) -> float:
        return self.pods / self.span if self.span > 0 else float("nan")


async def in_parallel(items: Iterable[Any], fn: Callable[[Any], Awaitable[object]], workers: int = 64,
                      ) -> None:
    queue = list(items)
    it = iter(queue)

    async def worker() -> None:
        for item in it:
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(min(workers, len(queue)) or 1)))


class Metrics:
    """The API server's /metrics, read with the admin client certificate."""

    def __init__(self, env: Environment) -> None:
        pki = env.state_dir / "pki"
        self._url = env.apiserver_url + "/metrics"
        self._ctx = ssl_context(pki / "ca.crt", pki / "admin.crt", pki / "admin.key")

    async def requests(self) -> Counter[tuple[str, str, str]]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ctx)) as http, \
                http.get(self._url) as resp:
            resp.raise_for_status()
            return parse_requests(await resp.text())


async def set_up_cluster(kube: KubeClient, w: Workload) -> None:
    await kube.create(DEVICE_CLASSES, objects.device_class())

    async def node(i: int) -> None:
        await kube.create(NODES, objects.node(i))
        await kube.create(RESOURCE_SLICES, objects.resource_slice(i, w.devices, w.pci_roots))

    await in_parallel(range(w.nodes), node)
    if not w.shared:
        template = objects.claim_template(w.requests, w.cel, w.match_attribute)
        await kube.create(RESOURCE_CLAIM_TEMPLATES, template, TEST)


async def allocate_init_claims(kube: KubeClient, w: Workload, rng: random.Random) -> None:
    free = {i: list(range(w.devices)) for i in range(w.nodes)}
    plan = []
    for k in range(w.init_claims):
        i = rng.choice([n for n, devs in free.items() if devs])
        plan.append((k, i, free[i].pop(0)))
        if not free[i]:
            del free[i]

    async def one(item: tuple[int, int, int]) -> None:
        k, i, d = item
        c = await kube.create(RESOURCE_CLAIMS, objects.claim(k), INIT)
        devices = [("req-0", f"basic-device-{d}")]
        alloc = objects.allocation(objects.node_name(i), objects.pool_name(i), devices)
        await kube.patch(RESOURCE_CLAIMS, c["metadata"]["name"], {"status": {"allocation": alloc}}, INIT,
                         subresource="status")

    await in_parallel(plan, one)


async def create_pods(kube: KubeClient, tracker: PodTracker, names: list[str], scheduler: str,
                      namespace: str, shared: bool) -> None:
    async def one(name: str) -> None:
        index = int(name.rsplit("-", 1)[1])
        body = objects.pod(name, scheduler, claim_name=f"test-claim-{index // 5}" if shared else "")
        tracker.create_started[name] = time.monotonic()
        await kube.create(PODS, body, namespace)
        tracker.created[name] = time.monotonic()

    await in_parallel(names, one, CREATORS)


def pin(pid: int, cpus: set[int]) -> None:
    """``taskset -a -p``: every thread of ``pid`` and of its descendants onto ``cpus`` (threads created later
    inherit it from their creator)."""
    tasks = Path(f"/proc/{pid}/task")
    for task in tasks.iterdir():
        os.sched_setaffinity(int(task.name), cpus)
        children = (task / "children").read_text().split()
        for child in children:
            pin(int(child), cpus)


async def run_one(w: Workload, stack_name: str, *, seed: int = 1, stall: float = 180.0,
                  cpus: set[int] | None = None, profile_dir: Path | None = None,
                  pyspy_dir: Path | None = None) -> Result:
    """``profile_dir``: profile kube-apiserver over the measured phase into it (:mod:`apiprofile`);
    ``pyspy_dir``: the stack's Python services, with py-spy (:mod:`pyspy`)."""
    result = Result(w.name, stack_name)
    async with Environment(secure_nats=True,
                           apiserver_args=apiprofile.APISERVER_ARGS if profile_dir else ()) as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        try:
            for ns in (INIT, TEST):
                await env.admin.ensure_service_account(ns, "default")
            stack = await stacks.start(env, stack_name)
            pids = {**stacks.server_pids(env), **{n: p.pid for n, p in stack.processes.items() if p.pid}}
            pids[HARNESS] = os.getpid()  # this process: pod creators + the bound-pod watch
            if cpus is not None:  # the stack's controllers only; API server, etcd, NATS, Jaeger unpinned
                for proc in stack.processes.values():
                    if proc.pid:
                        pin(proc.pid, cpus)
            metrics = Metrics(env)
            t0 = time.monotonic()
            await set_up_cluster(kube, w)
            await allocate_init_claims(kube, w, random.Random(seed))
            if w.shared:
                await shared_init(kube, w, stack.scheduler_name, stall)
                await in_parallel(range(w.measure_pods // 5), lambda k: kube.create(
                    RESOURCE_CLAIMS, objects.claim(k), TEST))
            else:
                await asyncio.sleep(5)  # let both stacks' informers digest the slices before pods come
            progress(f"{w.name}/{stack_name}: set up in {time.monotonic() - t0:.0f} s")
            tracker = PodTracker(kube, TEST)
            await tracker.start()
            result.load = load_average()
            before = (cpu_snapshot(pids), await metrics.requests())
            profiler = None
            if profile_dir is not None:
                profiler = apiprofile.Profiler(env, profile_dir, f"{w.name}-{stack_name}")
                await profiler.start()
            spy = None
            if pyspy_dir is not None:
                spy = pyspy.PySpy(stack.processes, pyspy_dir, f"{w.name}-{stack_name}")
                await spy.start()
            if w.mode == "burst":
                end, client = await measure_burst(kube, w, tracker, stack.scheduler_name, stall, result)
            else:
                end, client = await measure_steady(kube, w, tracker, stack.scheduler_name, result)
            after = (cpu_snapshot(pids), await metrics.requests())
            if spy is not None:
                await spy.stop()
            if profiler is not None:
                await profiler.stop(before[1], after[1], result.pods)
            result.cpu = {n: after[0][n] - before[0][n] for n in after[0] if n in before[0]}
            result.rss = {n: peak_rss_mib(pid) for n, pid in pids.items() if n != HARNESS}
            all_writes = writes(before[1], after[1])
            result.client_writes = sum(client.values())
            result.writes = all_writes - client
            await tracker.stop()
            samples = [s for s in tracker.samples if s[0] <= end]
            result.perf_throughput = scheduler_perf_throughput(samples)
            result.verdict = await check(kube, w)
            for name, proc in stack.processes.items():
                if not proc.running:
                    result.note += f" {name} exited ({proc.returncode}), log {proc.log_path};"
        finally:
            await kube.close()
    return result


async def shared_init(kube: KubeClient, w: Workload, scheduler: str, stall: float) -> None:
    await in_parallel(range(w.init_pods // 5), lambda k: kube.create(RESOURCE_CLAIMS, objects.claim(k), INIT))
    tracker = PodTracker(kube, INIT)
    await tracker.start()
    names = [f"test-dra-{i}" for i in range(w.init_pods)]
    t0 = time.monotonic()
    await create_pods(kube, tracker, names, scheduler, INIT, shared=True)
    done = await tracker.wait_bound(set(names), stall)
    await tracker.stop()
    progress(f"  {len(tracker.bound)}/{len(names)} initial pods bound in {time.monotonic() - t0:.0f} s")
    if not done:
        raise RuntimeError(f"initial pods: only {len(tracker.bound)} of {len(names)} bound")


async def measure_burst(kube: KubeClient, w: Workload, tracker: PodTracker, scheduler: str, stall: float,
                        result: Result) -> tuple[float, Counter[tuple[str, str, str]]]:
    names = [f"test-dra-{i}" for i in range(w.measure_pods)]
    first = time.monotonic()
    await create_pods(kube, tracker, names, scheduler, TEST, w.shared)
    progress(f"  {len(names)} pods created in {time.monotonic() - first:.0f} s, "
             f"{len(tracker.bound)} bound so far")
    done = await tracker.wait_bound(set(names), stall)
    end = time.monotonic()
    bound = [tracker.bound[n] for n in names if n in tracker.bound]
    result.expected, result.pods = len(names), len(bound)
    result.span = (max(bound) - min(tracker.create_started.values())) if bound else float("nan")
    result.latencies = tracker.latencies(set(names))
    if not done:
        result.note += f" stalled: no pod bound for {stall:.0f} s;"
    await asyncio.sleep(2)  # writes that follow the binding (events, status) belong to this phase
    return end, Counter({("POST", "pods", ""): len(names)})


async def measure_steady(kube: KubeClient, w: Workload, tracker: PodTracker, scheduler: str,
                         result: Result) -> tuple[float, Counter[tuple[str, str, str]]]:
    counter = itertools.count()
    client: Counter[tuple[str, str, str]] = Counter()
    running = True
    tasks: set[asyncio.Task[None]] = set()
    measured: set[str] = set()

    async def create(n: int) -> None:
        names = [f"test-dra-{next(counter)}" for _ in range(n)]
        measured.update(names)
        client[("POST", "pods", "")] += n
        await create_pods(kube, tracker, names, scheduler, TEST, False)

    async def replace(pod: dict[str, Any]) -> None:
        client[("DELETE", "pods", "")] += 1
        with contextlib.suppress(NotFound):
            await kube.delete(PODS, pod["metadata"]["name"], TEST, grace_period_seconds=0)
        if running:
            await create(1)

    def on_bound(pod: dict[str, Any]) -> None:
        if running:
            task = asyncio.create_task(replace(pod))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    tracker.on_bound = on_bound
    start = time.monotonic()
    await create(w.measure_pods)
    await asyncio.sleep(max(0.0, start + w.duration - time.monotonic()))
    running = False
    end = time.monotonic()
    await asyncio.gather(*tasks, return_exceptions=True)
    in_window = [n for n in measured if n in tracker.bound and tracker.bound[n] <= end]
    result.expected, result.pods = 0, len(in_window)
    result.span = end - start
    result.latencies = tracker.latencies(set(in_window))
    return end, client


async def check(kube: KubeClient, w: Workload) -> Verdict:
    pods = (await kube.list(PODS, namespace=TEST)).get("items") or []
    claims = (await kube.list(RESOURCE_CLAIMS)).get("items") or []
    pool_nodes = {objects.pool_name(i): objects.node_name(i) for i in range(w.nodes)}
    return verify(pods, claims, pool_nodes, all_bound=w.mode == "burst")


def load_average() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def progress(msg: str) -> None:
    print(f"[side-by-side] {msg}", file=sys.stderr, flush=True)
