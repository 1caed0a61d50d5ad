"""Benchmark: NodePrepareResources round trips and the shim's prepare throughput.

    python services/kubelet-dra-shim/bench/prepare.py [--kubeconfig PATH] [--calls 300] [--pods 200]
                                                      [--fleet-nodes 100] [--root /tmp]

Without ``--kubeconfig`` it starts the real local environment (draflow_testenv). The driver is the real
``reference-driver`` as a subprocess (it reads each claim from the API server, as drivers do).

1. **Round trip**: ``NodePrepareResources`` + ``NodeUnprepareResources`` for one claim at a time over the
   unix socket, measured at the client (the shim's ``Plugin`` stub), every other call with the claim passed
   in the metadata as kubelet-dra-shim sends it (:mod:`draflow_runtime.passedclaims`), the others without
   (the driver GETs the claim, as with an upstream kubelet): p50 / p99 in milliseconds, and the
   driver process's CPU time per prepare + unprepare pair (from /proc: what the machine's load does not
   inflate the way it inflates latency).
2. **Throughput, one node**: ``NodeManager.prepare_pod`` for ``--pods`` pods (one allocated claim each),
   8 at a time, as the shim's workers do: live claim GET, checkpoint before and after, the RPC.
3. **Throughput, fleet**: the same over ``--fleet-nodes`` nodes served by one driver process.

Prints a Markdown snippet (for docs/benchmarks.md). No numbers are asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchpods import allocated_pod

from draflow_runtime.errors import AlreadyExists
from draflow_runtime.files import atomic_write
from draflow_runtime.journal import JournalWriter
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NAMESPACES,
    RESOURCE_CLAIMS,
    SERVICE_ACCOUNTS,
    KubeClient,
)
from draflow_runtime.log import configure_logging
from draflow_runtime.passedclaims import claims_metadata
from draflow_testenv.benchkit import cluster, cpu_seconds, load_note
from draflow_testenv.benchkit import percentile as pct
from kubelet_dra_shim.claimevents import ClaimEvents
from kubelet_dra_shim.manager import NodeManager
from kubelet_dra_shim.plugins import PluginStore
from kubelet_dra_shim.registration import registration_watcher

DRIVER = "gpu.draflow.example"
VENV_BIN = Path(sys.executable).parent
GPUS = 256  # devices per node: every bench claim gets its own device


def ms(values: list[float]) -> str:
    """``p50 / p99 ms`` of seconds."""
    return f"{statistics.median(values) * 1000:.2f} / {pct(values, 0.99) * 1000:.2f} ms"


async def start_driver(root: Path, nodes: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    argv = [
        str(VENV_BIN / "reference-driver"),
        "--nodes",
        ",".join(nodes),
        "--fleet-root",
        str(root),
        "--http-port",
        "0",
        "--nats-url",
        "",
        "--log-level",
        "warning",
        "--gpu-count",
        str(GPUS),
    ]
    return await asyncio.create_subprocess_exec(
        *argv, env={**os.environ, **env}, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


async def register(root: Path, node: str) -> PluginStore:
    store = PluginStore()
    watcher = registration_watcher({node: (root / node / "plugins_registry", store)})
    for _ in range(600):
        await watcher.sync()
        if store.get(DRIVER) is not None:
            return store
        await asyncio.sleep(0.1)
    raise RuntimeError(f"driver did not register for node {node}")


async def make_pods(kube: KubeClient, ns: str, cls: str, placements: list[tuple[str, str, str]]) -> list[Any]:
    sem = asyncio.Semaphore(16)

    async def one(p: tuple[str, str, str]) -> Any:
        async with sem:
            return await allocated_pod(kube, ns, p[0], p[1], cls, DRIVER, p[2])

    return list(await asyncio.gather(*(one(p) for p in placements)))


@dataclass
class RoundTrips:
    """Seconds per call: the round trips, and the two steps inside the driver that wait on something
    else, measured the same way from this process between the calls (where the time goes)."""

    rpc: list[float] = field(default_factory=list)  # with the claim passed, as kubelet-dra-shim calls
    rpc_get: list[float] = field(default_factory=list)  # without: the driver GETs it (an upstream kubelet)
    unprepare: list[float] = field(default_factory=list)  # NodeUnprepareResources of the claim
    floor: list[float] = field(default_factory=list)  # NodeUnprepareResources of an unknown claim: no disk
    claim_get: list[float] = field(default_factory=list)  # the driver's first step: a live claim GET
    file_fsync: list[float] = field(default_factory=list)  # a whole-file write: temp, fsync, rename
    journal: list[float] = field(default_factory=list)  # its checkpoint change: a journal append + fdatasync
    driver_cpu: float = 0.0  # the driver's CPU seconds per NodePrepareResources + NodeUnprepareResources


async def round_trips(
    kube: KubeClient, ns: str, cls: str, root: Path, calls: int, driver_pid: int
) -> RoundTrips:
    """NodePrepareResources + NodeUnprepareResources, one claim at a time (see :class:`RoundTrips`)."""
    node = "bench-rt"
    store = await register(root, node)
    plugin = store.get(DRIVER)
    assert plugin is not None
    pods = await make_pods(kube, ns, cls, [(f"rt-{i}", node, f"gpu-{i % GPUS}") for i in range(calls)])
    m = plugin.messages
    stub = plugin.stub()
    out = RoundTrips()
    probe = JournalWriter(root / "journal-probe", 1, size=64 * 1024)
    cpu0 = cpu_seconds(driver_pid)
    for i, pod in enumerate(pods):
        t0 = time.perf_counter()
        claim = await kube.get(RESOURCE_CLAIMS, pod["metadata"]["name"], namespace=ns)
        out.claim_get.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        atomic_write(root / "fsync-probe", b"x" * 600, durability="file")
        out.file_fsync.append(time.perf_counter() - t0)
        if len(b"x" * 600) > probe.room():
            probe.restart(probe.epoch + 1)
        t0 = time.perf_counter()
        await probe.sync(probe.append(b"x" * 600))
        out.journal.append(time.perf_counter() - t0)
        req_claim = m.Claim(namespace=ns, uid=claim["metadata"]["uid"], name=claim["metadata"]["name"])
        passed = claims_metadata([claim]) if i % 2 == 0 else []
        t0 = time.perf_counter()
        resp = await stub.NodePrepareResources(
            m.NodePrepareResourcesRequest(claims=[req_claim]), timeout=30, metadata=passed
        )
        (out.rpc if passed else out.rpc_get).append(time.perf_counter() - t0)
        assert not resp.claims[req_claim.uid].error, resp.claims[req_claim.uid].error
        t0 = time.perf_counter()
        await stub.NodeUnprepareResources(m.NodeUnprepareResourcesRequest(claims=[req_claim]), timeout=30)
        out.unprepare.append(time.perf_counter() - t0)
        unknown = m.Claim(namespace=ns, uid=str(uuid.uuid4()), name="unknown")
        t0 = time.perf_counter()
        await stub.NodeUnprepareResources(m.NodeUnprepareResourcesRequest(claims=[unknown]), timeout=30)
        out.floor.append(time.perf_counter() - t0)
    out.driver_cpu = (cpu_seconds(driver_pid) - cpu0) / len(pods)
    probe.close()
    await plugin.close()
    return out


async def throughput(
    kube: KubeClient, ns: str, cls: str, root: Path, nodes: list[str], pods_n: int, prefix: str
) -> tuple[float, int]:
    stores = dict(zip(nodes, await asyncio.gather(*(register(root, n) for n in nodes)), strict=True))
    managers = {
        n: NodeManager(n, root / n / "kubelet", stores[n], kube, ClaimEvents(None), boot_id="bench")
        for n in nodes
    }
    placements = [
        (f"{prefix}-{i}", nodes[i % len(nodes)], f"gpu-{(i // len(nodes)) % GPUS}") for i in range(pods_n)
    ]
    pods = await make_pods(kube, ns, cls, placements)
    sem = asyncio.Semaphore(8)

    async def prepare(pod: dict[str, Any]) -> None:
        async with sem:
            outcome = await managers[pod["spec"]["nodeName"]].prepare_pod(pod)
            assert outcome.ready, (outcome.waiting, outcome.failures)

    t0 = time.perf_counter()
    await asyncio.gather(*(prepare(p) for p in pods))
    elapsed = time.perf_counter() - t0
    for s in stores.values():
        for p in s.all():
            await p.close()
    return pods_n / elapsed, len(nodes)


async def run(args: argparse.Namespace) -> str:
    configure_logging("bench", "warning")
    async with cluster(args.kubeconfig) as kubeconfig:
        kube = await KubeClient.from_kubeconfig(kubeconfig)
        root = Path(tempfile.mkdtemp(prefix="shimb-", dir=args.root))
        ns = f"bench-shim-{uuid.uuid4().hex[:6]}"
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        with contextlib.suppress(AlreadyExists):  # no controller-manager here: pods need it
            await kube.create(
                SERVICE_ACCOUNTS,
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
                namespace=ns,
            )
        cls = f"bench-{uuid.uuid4().hex[:6]}"
        await kube.create(
            DEVICE_CLASSES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": cls},
                "spec": {},
            },
        )
        fleet_nodes = [f"bench-f{i}" for i in range(args.fleet_nodes)]
        loads = [os.getloadavg()[0]]
        driver = await start_driver(root, ["bench-rt", "bench-one", *fleet_nodes], {"KUBECONFIG": kubeconfig})
        try:
            trips = await round_trips(kube, ns, cls, root, args.calls, driver.pid)
            one_rate, _ = await throughput(kube, ns, cls, root, ["bench-one"], args.pods, "one")
            loads.append(os.getloadavg()[0])
            fleet_rate, n = await throughput(kube, ns, cls, root, fleet_nodes, args.pods, "fleet")
            loads.append(os.getloadavg()[0])
        finally:
            driver.terminate()
            await driver.wait()
            shutil.rmtree(root, ignore_errors=True)  # sockets, CDI specs, checkpoints of every bench node
            await kube.delete(NAMESPACES, ns)
            await kube.delete(DEVICE_CLASSES, cls)
            await kube.close()
    return "\n".join(
        [
            "### kubelet-dra-shim: prepare",
            "",
            f"reference-driver subprocess, real kube-apiserver, {os.cpu_count()} CPUs shared with the "
            "API server.",
            "",
            "| measurement | value |",
            "|---|---|",
            f"| NodePrepareResources round trip, 1 claim passed in the metadata (kubelet-dra-shim), "
            f"p50 / p99 ({len(trips.rpc)} calls) | {ms(trips.rpc)} |",
            f"| NodePrepareResources round trip, 1 claim the driver reads itself (upstream kubelet), "
            f"p50 / p99 ({len(trips.rpc_get)} calls) | {ms(trips.rpc_get)} |",
            f"| NodeUnprepareResources round trip of the same claims, p50 / p99 "
            f"({len(trips.unprepare)} calls) | {ms(trips.unprepare)} |",
            f"| floor: NodeUnprepareResources of an unknown claim (no disk write), p50 / p99 "
            f"({len(trips.floor)} calls) | {ms(trips.floor)} |",
            f"| inside it: the driver's live claim GET, p50 / p99 (timed from this process) "
            f"| {ms(trips.claim_get)} |",
            f"| inside it: the driver's checkpoint change, a journal append + fdatasync, p50 / p99 (same) "
            f"| {ms(trips.journal)} |",
            f"| for comparison: a whole-file write, temp + fsync + rename, p50 / p99 (same) "
            f"| {ms(trips.file_fsync)} |",
            "| reference-driver CPU per NodePrepareResources + NodeUnprepareResources (both kinds) "
            f"| {trips.driver_cpu * 1000:.2f} ms |",
            f"| prepare throughput, 1 node, {args.pods} pods x 1 claim | {one_rate:.0f} claims/s |",
            f"| prepare throughput, fleet of {n} nodes, {args.pods} pods x 1 claim "
            f"| {fleet_rate:.0f} claims/s |",
            "",
            "Throughput is `NodeManager.prepare_pod` end to end (live claim GET, checkpoint before and after",
            "the RPC), 8 pods at a time; prepares of different claims run side by side (per-claim locks,",
            "as in the kubelet). The round trip includes the driver's CDI spec write (rename, no fsync, as",
            "the CDI library) and its checkpoint change (one journal record, fdatasync-ed before the",
            "answer), and without a passed claim the driver's own live claim GET (as upstream's",
            "kubeletplugin does). The 'inside it' rows time those steps alone from the bench process,",
            "between the calls: what is left of the round trip is gRPC, the driver's Python and waiting",
            "for a CPU; the floor row is that alone (gRPC, the driver's Python, one thread hop).",
            "",
            load_note(loads),
        ]
    ).rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--fleet-nodes", type=int, default=100)
    parser.add_argument("--root", default="/tmp", help="where the fleet's sockets, CDI specs, checkpoints go")
    print(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
