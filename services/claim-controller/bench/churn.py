"""Claim churn benchmark of the claim-controller against a real kube-apiserver.

Creates ``--pods`` pods (default 5,000), each with ``--claims-per-pod`` claims from one template, in
batches of ``--batch``; while batch *k* is created, the pods of batch *k-1* finish (phase Succeeded), so
their claims are deallocated and deleted while new ones are being made — churn, not a one-way fill. The
controller runs in this process (informers, queue, workers: the real code) with ``--workers`` workers.

Measured:

- **claims created/s**: claims created by the controller ÷ time from the first pod create to the last
  claim recorded in its pod's status;
- **pod → claims recorded** p50/p99: from the pod create returning to the pod watch showing every claim
  in ``status.resourceClaimStatuses`` (what the allocator waits for);
- **queue latency** p50/p99: time a key waited in the work queue before a worker took it (measured
  exactly, per key, by a thin WorkQueue subclass);
- **claims created + deleted/s** over the whole churn, the reconcile count and mean duration, and the
  CPU time of this process per claim (less sensitive to a busy machine than the rates);
- **API writes of the controller per pod**: the API server's ``apiserver_request_total`` over the run
  minus the writes the load generator made, by verb and resource.

With ``--replicas N`` the controller runs as N ``claim-controller`` processes splitting the work over
``--shards`` Leases (``replicas.py``): claims created and reconciles per replica from their /metrics, CPU
of the controller processes per claim; the work-queue latency is then not measured.

With ``--allocate`` the load generator plays the scheduler before a pod finishes: it adds the
delete-protection finalizer to each of the pod's claims and writes an allocation with the pod in
``reservedFor``, so the controller's clean-up is the full one (unreserve + deallocate, finalizer, delete).

Results are printed as a Markdown snippet. No timing is asserted anywhere. Without ``--kubeconfig`` (or
``$KUBECONFIG``) a throw-away draflow-testenv environment is started and stopped.

    .venv/bin/python services/claim-controller/bench/churn.py --pods 1000 --batch 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from apiwrites import WriteKey, controller_writes, label, scrape_writes
from churnparts import allocate_claims, start_bus
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import REGISTRY
from replicas import Replicas, summary

from claim_controller.controller import Controller
from claim_controller.settings import Settings
from draflow_runtime.errors import AlreadyExists, NotFound
from draflow_runtime.informer import Informer
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    LEASES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    SERVICE_ACCOUNTS,
    KubeClient,
)
from draflow_runtime.log import configure_logging
from draflow_runtime.workqueue import WorkQueue

DEVICE_CLASS = "bench-churn-gpu"
ALLOCATED = " (claims allocated by the load generator)"
CONCURRENT_WRITES = 32


class TimedQueue(WorkQueue):
    """A WorkQueue that records, per handed-out key, how long it waited since it became ready."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ready_at: dict[Hashable, float] = {}
        self.waits: list[float] = []
        self.handed_out = 0

    def add(self, key: Hashable) -> None:
        if not self.shutting_down and key not in self.ready_at:
            self.ready_at[key] = time.monotonic()
        super().add(key)

    async def get(self) -> Hashable:
        key = await super().get()
        started = self.ready_at.pop(key, None)
        if started is not None:
            self.waits.append(time.monotonic() - started)
        self.handed_out += 1
        return key


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def pod_body(name: str, claims: int) -> dict[str, Any]:
    names = [f"gpu-{i}" for i in range(claims)]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": n} for n in names]}}],
            "resourceClaims": [{"name": n, "resourceClaimTemplateName": "bench"} for n in names],
        },
    }


class Observer:
    """Watches pods and claims of the namespace; notes when each pod got all its claims recorded."""

    def __init__(self, kube: KubeClient, namespace: str, claims_per_pod: int) -> None:
        self.claims_per_pod = claims_per_pod
        self.created_at: dict[str, float] = {}
        self.recorded_at: dict[str, float] = {}
        self.claims_seen: set[str] = set()
        self.claims_live: set[str] = set()
        self.pods = Informer(kube, PODS, namespace, name="bench-pods")
        self.claims = Informer(kube, RESOURCE_CLAIMS, namespace, name="bench-claims")
        self.pods.add_handler(self._on_pod)
        self.claims.add_handler(self._on_claim)

    def _on_pod(self, _event: str, _old: Any, new: dict[str, Any] | None) -> None:
        if new is None:
            return
        name = new["metadata"]["name"]
        statuses = (new.get("status") or {}).get("resourceClaimStatuses") or ()
        if name not in self.recorded_at and len(statuses) >= self.claims_per_pod:
            self.recorded_at[name] = time.monotonic()

    def _on_claim(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        name = (new or old or {}).get("metadata", {}).get("name", "")
        if event == "delete":
            self.claims_live.discard(name)
        else:
            self.claims_seen.add(name)
            self.claims_live.add(name)

    async def start(self) -> None:
        await self.pods.start()
        await self.claims.start()
        await self.pods.wait_synced()
        await self.claims.wait_synced()

    async def stop(self) -> None:
        await self.pods.stop()
        await self.claims.stop()


async def wait_until(predicate: Any, deadline: float, what: str) -> None:
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def setup(kube: KubeClient, namespace: str) -> None:
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    with contextlib.suppress(AlreadyExists):
        await kube.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                             "metadata": {"name": "default"}}, namespace)
    with contextlib.suppress(AlreadyExists):
        await kube.create(DEVICE_CLASSES, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                           "metadata": {"name": DEVICE_CLASS}, "spec": {}})
    await kube.create(RESOURCE_CLAIM_TEMPLATES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "bench"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]}}},
    }, namespace)


async def teardown(kube: KubeClient, namespace: str) -> None:
    """Best effort: no namespace controller may be running (draflow-testenv), so empty it first."""
    with contextlib.suppress(Exception):
        await kube.delete_collection(PODS, namespace)
        await kube.delete_collection(RESOURCE_CLAIMS, namespace)
        await kube.delete_collection(RESOURCE_CLAIM_TEMPLATES, namespace)
        await kube.delete_collection(LEASES, namespace)
    with contextlib.suppress(NotFound):
        await kube.delete(NAMESPACES, namespace)


async def churn(kube: KubeClient, args: argparse.Namespace) -> dict[str, Any]:
    namespace = f"bench-churn-{uuid.uuid4().hex[:6]}"
    await setup(kube, namespace)
    queue = TimedQueue(name="claim-controller-bench")
    replicas: Replicas | None = None
    task: asyncio.Task[None] | None = None
    bus = None
    if args.replicas:
        replicas = Replicas(args.kubeconfig_path, namespace, args.replicas, args.shards, args.workers,
                            args.log_dir)
    else:
        settings = Settings(http_port=0, nats_url=args.nats_url, workers=args.workers, namespace=namespace)
        bus = await start_bus(args.nats_url) if args.nats_url else None
        # An SDK tracer provider as the service has (valid trace ids: claim roots written at creation).
        controller = Controller(settings, kube, namespace=namespace, queue=queue, bus=bus, requester=bus,
                                tracer_provider=TracerProvider())
        task = asyncio.create_task(controller.run(), name="claim-controller")
    observer = Observer(kube, namespace, args.claims_per_pod)
    semaphore = asyncio.Semaphore(CONCURRENT_WRITES)

    async def create_pod(name: str) -> None:
        async with semaphore:
            await kube.create(PODS, pod_body(name, args.claims_per_pod), namespace)
            observer.created_at[name] = time.monotonic()

    own_writes: Counter[WriteKey] = Counter()

    async def finish_pod(name: str) -> None:
        async with semaphore:
            if args.allocate:
                await allocate_claims(kube, namespace, name, own_writes)
            await kube.patch(PODS, name, {"status": {"phase": "Succeeded"}}, namespace, subresource="status")
            own_writes[("PATCH", "pods", "status")] += 1

    try:
        await observer.start()
        if replicas is not None:
            await replicas.start(kube)
        else:
            await wait_until(lambda: controller.synced, time.monotonic() + 60, "controller synced")
        names = [f"p-{i:05d}" for i in range(args.pods)]
        batches = [names[i:i + args.batch] for i in range(0, len(names), args.batch)]
        writes_before = await scrape_writes(kube)
        started, cpu_started = time.monotonic(), time.process_time()
        deadline = started + args.timeout
        previous: list[str] = []
        for batch in batches:
            await asyncio.gather(*(create_pod(n) for n in batch))
            if previous:  # the previous batch finishes while this one gets its claims
                await wait_until(lambda prev=previous: all(n in observer.recorded_at for n in prev),
                                 deadline, "claims of the previous batch")
                await asyncio.gather(*(finish_pod(n) for n in previous))
            previous = batch
        await wait_until(lambda: len(observer.recorded_at) >= args.pods, deadline, "all claims recorded")
        all_recorded = time.monotonic()
        await asyncio.gather(*(finish_pod(n) for n in previous))
        await wait_until(lambda: not observer.claims_live, deadline, "all claims deleted")
        all_deleted = time.monotonic()
        cpu_used = time.process_time() - cpu_started if replicas is None else replicas.cpu_used()
        samples = await replicas.samples() if replicas is not None else []
        own_writes[("POST", "pods", "")] += args.pods
        writes = controller_writes(writes_before, await scrape_writes(kube), own_writes)
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if replicas is not None:
            await replicas.stop()
        if bus is not None:
            await bus.stop()
        await observer.stop()
        await teardown(kube, namespace)

    latencies = [observer.recorded_at[n] - observer.created_at[n] for n in names if n in observer.created_at]
    claims = len(observer.claims_seen)
    return {
        "pods": args.pods, "batch": args.batch, "claims_per_pod": args.claims_per_pod,
        "workers": args.workers,
        "claims": claims,
        "create_seconds": all_recorded - started,
        "claims_per_second": claims / (all_recorded - started),
        "total_seconds": all_deleted - started,
        "churn_claims_per_second": 2 * claims / (all_deleted - started),
        "recorded_p50": statistics.median(latencies), "recorded_p99": percentile(latencies, 0.99),
        "queue_p50": percentile(queue.waits, 0.50), "queue_p99": percentile(queue.waits, 0.99),
        **_reconciles(queue, samples, replicas is not None),
        "replicas": args.replicas, "shards": args.shards, "per_replica": summary(samples),
        "cpu_ms_per_claim": 1000.0 * cpu_used / max(1, claims),
        "load": os.getloadavg()[0],
        "allocate": args.allocate,
        "writes": writes,
    }


def _reconciles(queue: TimedQueue, samples: list[dict[str, float]], processes: bool) -> dict[str, float]:
    if not processes:
        return {"reconciles": queue.handed_out,
                "reconcile_mean": _reconcile_seconds() / max(1, queue.handed_out)}
    count = sum(x.get("count", 0) for x in samples)
    return {"reconciles": int(count), "reconcile_mean": sum(x.get("sum", 0) for x in samples) / max(1, count)}


def _reconcile_seconds() -> float:
    value = REGISTRY.get_sample_value("draflow_reconcile_duration_seconds_sum", {"name": "claim-controller"})
    return float(value or 0.0)


def markdown(r: dict[str, Any]) -> str:
    ms = 1000.0
    where = (f"{r['replicas']} claim-controller processes, --shards {r['shards']}, " if r["replicas"]
             else "in process, ")
    queue = (f"{r['queue_p50'] * ms:.1f} ms / {r['queue_p99'] * ms:.1f} ms" if not r["replicas"]
             else "(not measured across processes)")
    cpu = ("CPU of the controller processes per claim" if r["replicas"]
           else "CPU of this process per claim (controller + load generator + watchers)")
    return "\n".join([
        f"### claim-controller churn ({r['pods']} pods x {r['claims_per_pod']} claims, "
        f"batches of {r['batch']}, {where}{r['workers']} workers)",
        "",
        "| metric | value |",
        "|---|---|",
        f"| claims created | {r['claims']} |",
        f"| claims created/s (first pod create → last claim recorded) | {r['claims_per_second']:.1f} |",
        f"| claims created + deleted per second (whole churn) | {r['churn_claims_per_second']:.1f} |",
        f"| pod created → claims recorded in status, p50 / p99 | {r['recorded_p50'] * ms:.0f} ms / "
        f"{r['recorded_p99'] * ms:.0f} ms |",
        f"| work-queue latency p50 / p99 | {queue} |",
        f"| reconciles (mean duration) | {r['reconciles']} ({r['reconcile_mean'] * ms:.1f} ms) |",
        f"| {cpu} | {r['cpu_ms_per_claim']:.1f} ms |",
        *([f"| work per replica | {r['per_replica']} |"] if r["replicas"] else []),
        f"| wall time (1-min load average at the end) | {r['total_seconds']:.1f} s ({r['load']:.1f}) |",
        f"| API writes of the controller per pod{ALLOCATED if r['allocate'] else ''}"
        f" | {sum(r['writes'].values()) / r['pods']:.2f}: "
        + ", ".join(f"{label(k)} {v / r['pods']:.2f}" for k, v in sorted(r["writes"].items())) + " |",
        "",
        ("Load generator and watchers in this process, the controllers in their own; " if r["replicas"] else
         "Controller, load generator and watchers share one Python process; ")
        + f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
    ])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    args.log_dir = Path(tempfile.mkdtemp(prefix="churn-replicas-"))
    if kubeconfig:
        args.kubeconfig_path = kubeconfig
        args.nats_url = os.environ.get("NATS_URL", "") if args.nats else ""
        kube = await KubeClient.from_kubeconfig(kubeconfig)
        async with kube:
            return await churn(kube, args)
    from draflow_testenv.environment import Environment

    async with Environment() as env:
        args.kubeconfig_path = str(env.kubeconfig)
        args.nats_url = env.nats_url if args.nats else ""
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        async with kube:
            return await churn(kube, args)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=5000, help="pods to create (default 5000)")
    parser.add_argument("--batch", type=int, default=250, help="pods per batch (default 250)")
    parser.add_argument("--claims-per-pod", type=int, default=1, help="template claims per pod (default 1)")
    parser.add_argument("--workers", type=int, default=8, help="controller workers (default 8)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds")
    parser.add_argument("--replicas", type=int, default=0,
                        help="run the controller as this many claim-controller processes sharing the work "
                        "(--shards); 0 (default): in this process")
    parser.add_argument("--shards", type=int, default=4, help="shards with --replicas (default 4)")
    parser.add_argument("--allocate", action="store_true",
                        help="allocate and reserve each pod's claims before it finishes (full clean-up)")
    parser.add_argument("--nats", action="store_true",
                        help="publish claim lifecycle events on NATS (the testenv's, or $NATS_URL with "
                        "--kubeconfig), as the service does; in-process controller only")
    parser.add_argument("--log-level", default="warning",
                        help="log level of the controller (info: its per-claim logs, JSON on stderr)")
    parser.add_argument("--kubeconfig", default=None, help="use this cluster instead of a fresh testenv")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging("claim-controller-bench", args.log_level)
    result = asyncio.run(main_async(args))
    print(markdown(result))


if __name__ == "__main__":
    main()
