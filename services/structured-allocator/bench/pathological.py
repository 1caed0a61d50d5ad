"""Does a pathological DeviceClass selector delay other pods? (issue 12, defects 4 and 5)

    .venv/bin/python services/structured-allocator/bench/pathological.py [--nodes 4] [--devices 16]
        [--pods 40] [--bad-every 4] [--gap 0.1]

Two runs, each against its own real kube-apiserver (testenv ``Environment``) with the in-process
allocator: ``--nodes`` Ready nodes with ``--devices`` devices each, one good DeviceClass, and ``--pods``
normal pods created one by one ``--gap`` seconds apart (pod, its template claim and
``status.resourceClaimStatuses``, as the claim-controller does). Measured per normal pod: creation to
``spec.nodeName`` seen by a pod watch; plus the longest event-loop stall seen by a 10 ms ticker.

* **baseline**: only normal pods.
* **pathological**: two more DeviceClasses the apiserver accepts — a regex that backtracking engines need
  minutes for (``"aaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$")``, evaluated per device) and a 3-deep
  comprehension over 25-element lists (past cel-cpp's iteration budget: broken input) — and after
  every ``--bad-every`` normal pods one pod of each of these classes.

Both runs also bump a spare ResourceSlice every second, which requeues every unschedulable pod, as
slice churn does in a real cluster. Prints a Markdown snippet; numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

from draflow_runtime.informer import Informer
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_runtime.log import configure_logging
from draflow_testenv.environment import Environment
from structured_allocator.scheduler import Scheduler
from structured_allocator.settings import Settings

DRIVER = "gpu.bench.draflow.dev"
NS = "bench"
SCHEDULER = "draflow-bench"
L25 = "[" + ", ".join(str(i) for i in range(25)) + "]"
CLASSES = {
    "good": f'device.driver == "{DRIVER}"',
    "redos": f'device.attributes["{DRIVER}"].model.find("(a+)+$") == "" && '
    '"aaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""',
    "deep": f"{L25}.all(a, {L25}.all(b, {L25}.all(c, a + b + c >= 0)))",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def slice_obj(node: str, devices: int, generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "aaaaaaaaaaaa!"}}}
                                 for i in range(devices)]}}


async def setup(kube: KubeClient, args: argparse.Namespace) -> None:
    await kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "spare"}, "spec": {}})
    await kube.create(RESOURCE_SLICES, slice_obj("spare", 1))
    for i in range(args.nodes):
        name = f"node-{i}"
        await kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})
        resources = {"pods": "110", "cpu": "64", "memory": "256Gi"}
        await kube.patch(NODES, name, {"status": {"capacity": resources, "allocatable": resources,
                                                  "conditions": [{"type": "Ready", "status": "True"}]}},
                         subresource="status")
        await kube.patch(NODES, name, {"spec": {"taints": None}})
        await kube.create(RESOURCE_SLICES, slice_obj(name, args.devices))
    for name, expression in CLASSES.items():
        await kube.create(DEVICE_CLASSES, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                           "metadata": {"name": name},
                                           "spec": {"selectors": [{"cel": {"expression": expression}}]}})
        await kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": name}}]}}}}, NS)


async def make_pod(kube: KubeClient, name: str, template: str) -> None:
    pod = await kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": SCHEDULER, "containers": [{
            "name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}, NS)
    tmpl = await kube.get(RESOURCE_CLAIM_TEMPLATES, template, NS)
    claim = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-gpu", "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                          "uid": pod["metadata"]["uid"], "controller": True}]},
        "spec": tmpl["spec"]["spec"]}, NS)
    await kube.patch(PODS, name, {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]}}, NS, subresource="status")


async def run(args: argparse.Namespace, pathological: bool) -> dict[str, Any]:
    async with Environment() as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        await env.admin.ensure_namespace(NS)
        await env.admin.ensure_service_account(NS, "default")
        await setup(kube, args)
        created: dict[str, float] = {}
        bound: dict[str, float] = {}

        def seen(event: str, old: Any, new: Any) -> None:
            name = (new or {}).get("metadata", {}).get("name")
            if name in created and name not in bound and (new.get("spec") or {}).get("nodeName"):
                bound[name] = time.perf_counter()

        pods = Informer(kube, PODS, NS, name="bench-pods")
        pods.add_handler(seen)
        await pods.start()
        sched = Scheduler(Settings(http_port=0, nats_url="", scheduler_names=SCHEDULER), kube, namespace=NS)
        task = asyncio.create_task(sched.run())
        while not sched.synced:  # noqa: ASYNC110 -- polling a flag of the code under test
            await asyncio.sleep(0.01)
        lag = 0.0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal lag
            while not stop.is_set():
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                lag = max(lag, time.perf_counter() - t - 0.01)

        async def churn() -> None:
            generation = 1
            while not stop.is_set():
                await asyncio.sleep(1.0)
                generation += 1
                current = await kube.get(RESOURCE_SLICES, "spare-gpu")
                body = slice_obj("spare", 1, generation)
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await kube.replace(RESOURCE_SLICES, body)

        helpers = [asyncio.create_task(ticker()), asyncio.create_task(churn())]
        bad = 0
        try:
            for i in range(args.pods):
                if pathological and i % args.bad_every == 0:
                    for cls in ("deep", "redos"):
                        await make_pod(kube, f"{cls}-{bad}", cls)
                    bad += 1
                name = f"p{i:03d}"
                created[name] = time.perf_counter()
                await make_pod(kube, name, "good")
                await asyncio.sleep(args.gap)
            deadline = time.perf_counter() + args.timeout
            while len(bound) < len(created) and time.perf_counter() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        latencies = [bound[n] - created[n] for n in bound]
        broken = sum(1 for k in sched.unschedulable if k.startswith(f"{NS}/deep-"))
        redos_bound = sum(1 for p in pods.list() if p["metadata"]["name"].startswith("redos-")
                          and (p.get("spec") or {}).get("nodeName"))
        await pods.stop()
        await kube.close()
    return {"pods": len(created), "bound": len(bound), "p50": percentile(latencies, 0.5),
            "p99": percentile(latencies, 0.99), "max": max(latencies, default=float("nan")), "lag": lag,
            "bad": bad, "broken": broken, "redos_bound": redos_bound,
            "decisions": len(sched.decision_seconds)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--pods", type=int, default=40)
    parser.add_argument("--bad-every", type=int, default=4)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    configure_logging("bench", "warning", "console", stream=sys.stderr)
    logging.getLogger().setLevel(logging.WARNING)
    rows = []
    for pathological in (False, True):
        r = asyncio.run(run(args, pathological))
        label = (f"with {r['bad']} + {r['bad']} pathological pods ({r['broken']} reported broken, "
                 f"{r['redos_bound']} regex pods bound)") if pathological else "baseline (normal pods only)"
        rows.append(f"| {label} | {r['bound']}/{r['pods']} | {r['p50'] * 1e3:.0f} ms "
                    f"| {r['p99'] * 1e3:.0f} ms | {r['max'] * 1e3:.0f} ms | {r['lag'] * 1e3:.0f} ms "
                    f"| {r['decisions']} |")
    print("\n".join([
        "### structured-allocator: normal pods next to pathological selectors", "",
        f"Normal pods' creation → bound ({args.nodes} nodes x {args.devices} devices, "
        f"{args.pods} normal pods {args.gap * 1e3:.0f} ms apart, a spare slice bumped every second; "
        f"pathological: one regex pod and one 3-deep-comprehension pod after every {args.bad_every} normal "
        "pods):", "",
        "| run | normal pods bound | p50 | p99 | max | longest event-loop stall | decisions |",
        "|---|---|---|---|---|---|---|", *rows, "",
        "Before issue 12 (Python's backtracking `re`), one decision for a regex pod held the event loop for "
        "about 71 s, delaying every other pod by as much; the 3-deep comprehension made its pods' "
        "decisions raise and retry forever. Here the stall column is the longest time any coroutine "
        "waited for the loop, the client creating the pods included.", ""]))


if __name__ == "__main__":
    main()
