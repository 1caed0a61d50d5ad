"""scheduler_perf-style ``SchedulingWithResourceClaimTemplate`` for the structured-allocator.

Two measurements (``make bench`` runs the defaults; flags make a quick run possible)::

    .venv/bin/python services/structured-allocator/bench/scheduler_perf.py \
        [--nodes 500] [--devices-per-node 8] [--pods 5000] [--memory-nodes 500,5000] [--no-apiserver]

1. **End to end, real kube-apiserver** (a testenv ``Environment``): ``--nodes`` Node objects (Ready) and
   one ResourceSlice per node with ``--devices-per-node`` devices are published directly; ``--pods``
   pods each with one template claim are created together with what the claim-controller would do
   (the ResourceClaim owned by the pod, ``pod.status.resourceClaimStatuses``), before the allocator
   starts. Then the in-process allocator (informers, decisions, writes: finalizer, status, binding)
   runs until every pod is bound or reported unschedulable: **pods/s** = pods placed / that time.
   The in-memory decision latency of that run is reported too.
2. **Decision latency in memory** at each of ``--memory-nodes``: the same Decider over the same
   SliceIndex and assume cache, fed directly (no API server), filling the cluster pod by pod. p50/p99
   of the time inside one decision (no I/O) should stay roughly flat as nodes grow.

Prints a Markdown snippet. No thresholds: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import time
import uuid
from typing import Any

from prometheus_client import REGISTRY

from draflow_runtime.informer import key_of
from draflow_runtime.log import configure_logging
from structured_allocator.assume import AssumeCache
from structured_allocator.core import CelCache
from structured_allocator.decision import Decider, Placement
from structured_allocator.device_counts import counting_slices
from structured_allocator.nodefit import NodeUsage, PodUsage, pod_demand
from structured_allocator.scoring import make_scorer

DRIVER = "gpu.bench.draflow.dev"
CLASS = "bench-gpu"
NAMESPACE = "bench"
SCHEDULER = "draflow-bench"


# -- objects ----------------------------------------------------------------------------------------------

def node_obj(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"bench": "yes"}},
            "spec": {}, "status": {"allocatable": {"pods": "110", "cpu": "64", "memory": "256Gi"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def slice_obj(node: str, devices: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i},
                                                                       "model": {"string": "bench-a"}}}
                                 for i in range(devices)]}}


def class_obj() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


CLAIM_SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}


def pod_obj(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulerName": SCHEDULER,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}}


def claim_obj(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{meta['name']}-gpu", "namespace": NAMESPACE,
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": CLAIM_SPEC}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- 2. in memory ------------------------------------------------------------------------------------------

class _Cache:
    def __init__(self, items: dict[str, dict[str, Any]]) -> None:
        self.items = items

    def get(self, key: str) -> dict[str, Any] | None:
        return self.items.get(key)

    def keys(self) -> list[str]:
        return list(self.items)


class MemoryState:
    """What the Decider reads from ClusterState, without informers."""

    def __init__(self, nodes: int, devices: int) -> None:
        names = [f"node-{i:05d}" for i in range(nodes)]
        self.nodes = _Cache({n: node_obj(n) for n in names})
        self.assume = AssumeCache()
        self.slices = counting_slices(self.assume.state, (slice_obj(n, devices) for n in names))
        self.device_counts = self.slices.counts
        self.claims = _Cache({})
        self.usage = NodeUsage()
        self._classes = {CLASS: class_obj()}
        self._names = sorted(names)

    def node_names(self) -> list[str]:
        return self._names

    def classes_by_name(self) -> dict[str, dict[str, Any]]:
        return self._classes


async def memory_run(nodes: int, devices: int, pods: int, nodes_to_find: int) -> dict[str, Any]:
    state = MemoryState(nodes, devices)
    decider = Decider(state, make_scorer("pack"), nodes_to_find, CelCache())  # type: ignore[arg-type]
    latencies: list[float] = []
    placed = 0
    for i in range(pods):
        pod = pod_obj(f"p{i}")
        pod["metadata"]["uid"] = str(uuid.uuid4())
        claim = claim_obj(pod)
        claim["metadata"]["uid"] = str(uuid.uuid4())
        state.claims.items[key_of(claim)] = claim
        pod["status"] = {"resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]}
        started = time.perf_counter()
        decision = await decider.decide(pod)
        latencies.append(time.perf_counter() - started)
        if isinstance(decision, Placement):
            placed += 1
            allocation = decision.claims[0].allocation
            assert allocation is not None
            # as if the write landed and the informer saw it
            state.assume.observe_claim({**claim, "status": {"allocation": allocation}})
            state.usage.observe(pod["metadata"]["uid"], PodUsage(decision.node, pod_demand(pod)))
    return {"nodes": nodes, "pods": pods, "placed": placed, "p50": percentile(latencies, 0.5),
            "p99": percentile(latencies, 0.99), "mean": statistics.fmean(latencies)}


# -- 1. end to end ------------------------------------------------------------------------------------------

def placements() -> int:
    """Write pipelines that placed a pod, from the allocator's own metric (one scheduler per process)."""
    return int(sum(REGISTRY.get_sample_value("draflow_allocator_placements_total", {"result": r}) or 0
                   for r in ("bound", "allocated")))


def timed_decisions(sched: Any) -> list[float]:
    """Time every decision of ``sched`` (the in-memory part, as the decision histogram does) into the
    returned list: the benchmark wraps the decider instead of the scheduler keeping every sample."""
    samples: list[float] = []
    decide = sched.decider.decide

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await decide(*args, **kwargs)
        finally:
            samples.append(time.perf_counter() - started)

    sched.decider.decide = timed  # type: ignore[method-assign]
    return samples


async def apiserver_run(args: argparse.Namespace) -> dict[str, Any]:
    from draflow_runtime.errors import AlreadyExists
    from draflow_runtime.kube import (
        DEVICE_CLASSES,
        NODES,
        PODS,
        RESOURCE_CLAIM_TEMPLATES,
        RESOURCE_CLAIMS,
        RESOURCE_SLICES,
        KubeClient,
    )
    from draflow_testenv.environment import Environment
    from structured_allocator.scheduler import Scheduler
    from structured_allocator.settings import Settings

    async with Environment() as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        await env.admin.ensure_namespace(NAMESPACE)
        await env.admin.ensure_service_account(NAMESPACE, "default")
        gate = asyncio.Semaphore(args.client_concurrency)

        async def call(coro: Any) -> Any:
            async with gate:
                return await coro

        async def make_node(i: int) -> None:
            name = f"node-{i:05d}"
            body = node_obj(name)
            status = body.pop("status")
            await kube.create(NODES, body)
            await kube.patch(NODES, name, {"status": status}, subresource="status")
            await kube.patch(NODES, name, {"spec": {"taints": None}})
            s = slice_obj(name, args.devices_per_node)
            del s["metadata"]["resourceVersion"]
            await kube.create(RESOURCE_SLICES, s)

        t0 = time.perf_counter()
        with contextlib.suppress(AlreadyExists):
            await kube.create(DEVICE_CLASSES, class_obj())
        await kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
            "spec": {"spec": CLAIM_SPEC}}, NAMESPACE)
        await asyncio.gather(*(call(make_node(i)) for i in range(args.nodes)))

        async def make_pod(i: int) -> None:
            pod = await kube.create(PODS, pod_obj(f"p{i:05d}"), NAMESPACE)
            claim = await kube.create(RESOURCE_CLAIMS, claim_obj(pod), NAMESPACE)
            await kube.patch(PODS, pod["metadata"]["name"], {"status": {"resourceClaimStatuses": [
                {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]}}, NAMESPACE,
                subresource="status")

        await asyncio.gather(*(call(make_pod(i)) for i in range(args.pods)))
        setup = time.perf_counter() - t0
        print(f"# set-up: {args.nodes} nodes, {args.pods} pods with claims in {setup:.1f}s", file=sys.stderr)

        settings = Settings(http_port=0, nats_url="", scheduler_names=SCHEDULER,
                            nodes_to_find=args.nodes_to_find, write_concurrency=args.write_concurrency)
        sched = Scheduler(settings, kube, namespace=NAMESPACE)
        decisions = timed_decisions(sched)
        capacity = args.nodes * args.devices_per_node
        expect_bound = min(args.pods, capacity)
        started = time.perf_counter()
        task = asyncio.create_task(sched.run())
        while not sched.synced:  # noqa: ASYNC110 -- polling a flag of the code under test
            await asyncio.sleep(0.01)
        synced = time.perf_counter() - started
        last_report = 0.0
        while placements() < expect_bound or len(sched.unschedulable) < args.pods - expect_bound:
            await asyncio.sleep(0.05)
            now = time.perf_counter() - started
            if now - last_report > 5:
                last_report = now
                print(f"#   {now:.0f}s: placed {placements()}, unschedulable {len(sched.unschedulable)}",
                      file=sys.stderr)
            if task.done():
                task.result()
            if now > args.timeout:
                break
        elapsed = time.perf_counter() - started
        placed, unschedulable = placements(), len(sched.unschedulable)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
    return {"nodes": args.nodes, "devices": capacity, "pods": args.pods, "placed": placed,
            "unschedulable": unschedulable, "elapsed": elapsed, "synced": synced,
            "pods_per_s": placed / elapsed, "decisions": len(decisions),
            "p50": percentile(decisions, 0.5), "p99": percentile(decisions, 0.99)}


# -- main ------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--memory-nodes", default="500,5000", help="comma-separated node counts")
    parser.add_argument("--memory-pods", type=int, default=0, help="pods per in-memory run (0: --pods)")
    parser.add_argument("--nodes-to-find", type=int, default=32)
    parser.add_argument("--write-concurrency", type=int, default=32)
    parser.add_argument("--client-concurrency", type=int, default=64, help="set-up requests in flight")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-apiserver", action="store_true", help="in-memory measurements only")
    args = parser.parse_args(argv)
    configure_logging("bench", "warning", "console", stream=sys.stderr)
    logging.getLogger().setLevel(logging.WARNING)

    lines = ["### structured-allocator: SchedulingWithResourceClaimTemplate", ""]
    if not args.no_apiserver:
        r = asyncio.run(apiserver_run(args))
        lines += [
            f"End to end against kube-apiserver ({r['nodes']} nodes x {args.devices_per_node} devices = "
            f"{r['devices']} devices, {r['pods']} pods with a template claim, pods and claims created "
            f"before the allocator starts):",
            "",
            "| pods placed | unschedulable | time | pods/s | decisions | decision p50 | decision p99 |",
            "|---|---|---|---|---|---|---|",
            f"| {r['placed']} | {r['unschedulable']} | {r['elapsed']:.1f} s (sync {r['synced']:.1f} s) "
            f"| **{r['pods_per_s']:.1f}** | {r['decisions']} | {r['p50'] * 1e3:.2f} ms "
            f"| {r['p99'] * 1e3:.2f} ms |",
            "",
        ]
    rows = []
    for n in [int(x) for x in args.memory_nodes.split(",") if x]:
        pods = args.memory_pods or args.pods
        r = asyncio.run(memory_run(n, args.devices_per_node, pods, args.nodes_to_find))
        rows.append(f"| {n} | {n * args.devices_per_node} | {pods} | {r['placed']} | {r['p50'] * 1e3:.3f} ms "
                    f"| {r['p99'] * 1e3:.3f} ms | {r['mean'] * 1e3:.3f} ms |")
    if rows:
        lines += ["In-memory decision latency (Decider only, no API server, cluster filling pod by pod, "
                  f"nodes_to_find={args.nodes_to_find}):", "",
                  "| nodes | devices | pods | placed | p50 | p99 | mean |", "|---|---|---|---|---|---|---|",
                  *rows, ""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
