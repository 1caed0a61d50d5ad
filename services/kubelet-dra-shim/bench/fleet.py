"""Benchmark: kubelet-dra-shim serving a fleet of simulated nodes (one process), with one reference-driver
process serving the same nodes.

    python services/kubelet-dra-shim/bench/fleet.py [--nodes 1000] [--pods 300] [--idle 20]
                                                    [--kubeconfig PATH]  # default: a fresh draflow-testenv

Steps: start the environment (unless ``--kubeconfig``), ``reference-driver --node-count N`` (fleet mode),
then ``kubelet-dra-shim --node-count N`` on the same fleet root (the simulated kubelet on: N Node objects,
N Leases renewed every ``--lease-renew-interval``), and measure

- **start**: shim start → every node's driver registered (``/debug/plugins``);
- **memory**: the shim's RSS once every node is registered, and RSS / nodes;
- **steady-state CPU** over ``--idle`` seconds (heartbeats, registry polling, informers), % of one core;
- **prepare latency at that scale**: ``--pods`` pods spread over the nodes, each with one claim written as the
  allocator writes it (allocation + reservedFor); from that write to the pod Running in the API (the shim's
  watch → live claim GET → checkpoint → ``NodePrepareResources`` over the node's unix socket → CDI devices
  annotation → status), observed with one watch: p50 / p99; plus the shim's own
  ``NodePrepareResources`` round trips from its /metrics (mean).

Prints a Markdown snippet (for docs/benchmarks.md). No pass/fail: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from benchpods import allocated_pod

from draflow_runtime.errors import AlreadyExists, Gone
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    LEASES,
    NAMESPACES,
    NODES,
    PODS,
    SERVICE_ACCOUNTS,
    KubeClient,
)
from draflow_testenv.benchkit import cluster, cpu_seconds, load_note, rss_kib, spawn, stop
from draflow_testenv.benchkit import percentile as pct
from draflow_testenv.benchkit import service_bin as _bin
from draflow_testenv.servers import free_port

DRIVER = "gpu.draflow.example"
GPUS = 8


async def registered(port: int) -> int:
    """Nodes whose driver the shim has registered."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/debug/plugins") as resp:
        plugins = await resp.json()
    return sum(1 for drivers in plugins.values() if DRIVER in drivers)


async def metric_sum_count(port: int, name: str, label: str) -> tuple[float, float]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        text = await resp.text()
    total = count = 0.0
    for line in text.splitlines():
        if label not in line:
            continue
        if line.startswith(name + "_sum{"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "_count{"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


async def prepare_latencies(
    kube: KubeClient, ns: str, cls: str, nodes: list[str], pods: int, limit: float
) -> list[float]:
    """Seconds from each pod's claim allocation write to the pod Running (one watch on the namespace)."""
    allocated: dict[str, float] = {}
    running: dict[str, float] = {}
    listing = await kube.list(PODS, namespace=ns)
    done = asyncio.Event()

    def seen(obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        if (obj.get("status") or {}).get("phase") == "Running" and name not in running:
            running[name] = now
            if len(running) == pods:
                done.set()

    async def watch() -> None:
        """Until every pod runs. The API server closes a watch whose reader falls behind (this process
        starved on a loaded machine): watch again from the last resourceVersion, list again if it expired
        (pods seen Running in that list count from then: pessimistic)."""
        rv = listing["metadata"]["resourceVersion"]
        while not done.is_set():
            try:
                events = kube.watch(PODS, namespace=ns, resource_version=rv, allow_bookmarks=False)
                async for _, obj in events:
                    rv = obj["metadata"].get("resourceVersion") or rv
                    seen(obj, time.monotonic())
                    if done.is_set():
                        return
            except Gone:
                relisted = await kube.list(PODS, namespace=ns)
                now = time.monotonic()
                for obj in relisted["items"]:
                    seen(obj, now)
                rv = relisted["metadata"]["resourceVersion"]

    task = asyncio.create_task(watch())
    sem = asyncio.Semaphore(8)  # the allocator's pace, more or less: a few pods at a time

    async def one(i: int) -> None:
        async with sem:
            name = f"p-{i}"
            node = nodes[(i * 7919) % len(nodes)]  # spread over the fleet
            await allocated_pod(kube, ns, name, node, cls, DRIVER, f"gpu-{i % GPUS}")
            allocated[name] = time.monotonic()

    try:
        await asyncio.sleep(0.5)  # the watch is connected before the first write
        await asyncio.gather(*(one(i) for i in range(pods)))
        try:
            await asyncio.wait_for(done.wait(), limit)
        except TimeoutError:
            raise SystemExit(f"only {len(running)}/{pods} pods Running after {limit}s") from None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return [running[n] - allocated[n] for n in allocated]


async def setup(kube: KubeClient, ns: str, cls: str) -> None:
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    with contextlib.suppress(AlreadyExists):  # no controller-manager here: pods need it
        await kube.create(
            SERVICE_ACCOUNTS,
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            namespace=ns,
        )
    await kube.create(
        DEVICE_CLASSES,
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls}, "spec": {}},
    )


async def bench(args: argparse.Namespace, kubeconfig: str, workdir: Path) -> str:
    kube = await KubeClient.from_kubeconfig(kubeconfig)
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    prefix = f"shimf-{os.getpid()}-"
    nodes = [f"{prefix}{i}" for i in range(args.nodes)]
    ns, cls = f"bench-fleet-{uuid.uuid4().hex[:6]}", f"bench-{uuid.uuid4().hex[:6]}"
    await setup(kube, ns, cls)
    root = workdir / "fleet"
    fleet_args = ["--node-name-prefix", prefix, "--node-count", str(args.nodes), "--fleet-root", str(root)]
    quiet = ["--nats-url", "", "--log-level", "warning"]
    driver = await spawn(
        [_bin("reference-driver"), *fleet_args, "--gpu-count", str(GPUS), "--http-port", "0", *quiet],
        workdir / "reference-driver.log",
        env,
    )
    shim = None
    port = free_port()
    try:
        t0 = time.monotonic()
        shim = await spawn(
            [
                _bin("kubelet-dra-shim"), *fleet_args, *quiet,
                "--http-port", str(port), "--http-host", "127.0.0.1",
                "--boot-id-file", str(workdir / "boot_id"),
                "--lease-renew-interval", str(args.lease_renew_interval),
            ],
            workdir / "kubelet-dra-shim.log",
            env,
        )
        (workdir / "boot_id").write_text("bench\n")
        while True:
            if shim.returncode is not None or driver.returncode is not None:
                raise SystemExit(f"a process exited early; see {workdir}")
            with contextlib.suppress(aiohttp.ClientError):
                if await registered(port) == args.nodes:
                    break
            if time.monotonic() - t0 > args.timeout:
                raise SystemExit(f"not every node registered after {args.timeout}s; see {workdir}")
            await asyncio.sleep(1.0)
        started = time.monotonic() - t0
        loads = [os.getloadavg()[0]]
        await asyncio.sleep(5.0)  # the first heartbeat round and informer echoes settle
        rss_idle = rss_kib(shim.pid)
        c0, w0 = cpu_seconds(shim.pid), time.monotonic()
        await asyncio.sleep(args.idle)
        idle_cpu = (cpu_seconds(shim.pid) - c0) / (time.monotonic() - w0) * 100

        latencies = await prepare_latencies(kube, ns, cls, nodes, args.pods, args.timeout)
        total, count = await metric_sum_count(
            port, "draflow_shim_dra_operation_duration_seconds", 'operation="NodePrepareResources"'
        )
        rss_after = rss_kib(shim.pid)
        loads.append(os.getloadavg()[0])
    finally:
        if shim is not None:
            await stop(shim)
        await stop(driver)
        with contextlib.suppress(Exception):
            await kube.delete(NAMESPACES, ns)
            await kube.delete(DEVICE_CLASSES, cls)
            await asyncio.gather(*(kube.delete(NODES, n) for n in nodes), return_exceptions=True)
            await asyncio.gather(
                *(kube.delete(LEASES, n, namespace="kube-node-lease") for n in nodes), return_exceptions=True
            )
        await kube.close()

    ms = [x * 1000 for x in latencies]
    rpc = f"{total / count * 1000:.1f} ms over {count:.0f} calls" if count else "no calls recorded"
    return "\n".join(
        [
            f"### kubelet-dra-shim: {args.nodes} simulated nodes in one process",
            "",
            "| measure | value |",
            "|---|---|",
            f"| shim start → every node's driver registered | {started:.1f} s |",
            f"| shim RSS with {args.nodes} nodes registered (idle) | {rss_idle / 1024:.0f} MiB |",
            f"| memory per node (RSS / nodes) | {rss_idle / args.nodes:.0f} KiB |",
            f"| shim RSS after {args.pods} pods prepared | {rss_after / 1024:.0f} MiB |",
            f"| steady-state shim CPU (idle {args.idle:.0f} s; Leases every"
            f" {args.lease_renew_interval:.0f} s)"
            f" | {idle_cpu:.1f} % of one core |",
            f"| prepare latency at {args.nodes} nodes: claim reserved → pod Running, p50 / p99"
            f" ({len(ms)} pods) | {pct(ms, 0.5):.0f} / {pct(ms, 0.99):.0f} ms |",
            f"| NodePrepareResources round trip seen by the shim (mean) | {rpc} |",
            "",
            f"Machine: {os.cpu_count()} CPUs, shared; kube-apiserver + etcd + reference-driver on the same "
            "machine.",
            "",
            load_note(loads),
        ]
    ).rstrip()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU sampling")
    parser.add_argument("--lease-renew-interval", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--kubeconfig", default=None, help="use this cluster instead of a fresh testenv")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="shim-fleet-", dir="/tmp"))
    async with cluster(args.kubeconfig) as kubeconfig:
        print(await bench(args, kubeconfig, workdir))
    print(f"\n(logs: {workdir})", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
