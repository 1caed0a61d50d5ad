"""Fleet mode: one shim process and one reference-driver process serve 200 simulated nodes.

Both run as real subprocesses (``.venv/bin/kubelet-dra-shim``, ``.venv/bin/reference-driver``). The test
prepares one claim per node, waits for every pod to run, and reports the shim's memory per node
(RSS at 200 nodes minus RSS at 1 node, divided by 199); there is no timing or memory assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from helpers import allocate, claim, device_class, eventually, pod, validate_cdi

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import NODES, PODS, KubeClient
from draflow_testenv.identity import ServiceIdentity
from draflow_testenv.servers import free_port
from draflow_testenv.wait import quiesce
from kubelet_dra_shim.simkubelet import CDI_ANNOTATION

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
DRIVER = "gpu.draflow.example"
FLEET_NODES = 200


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _registered(port: int, nodes: int) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/debug/plugins") as r:
            if r.status != 200:
                return False
            body = await r.json()
    except aiohttp.ClientError:
        return False
    return sum(1 for drivers in body.values() if DRIVER in drivers) == nodes


def _write_boot_id(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "boot_id").write_text("fleet-boot\n")


async def start_fleet(
    run_service: Any, testenv: Any, root: Path, prefix: str, count: int,
    shim: ServiceIdentity, driver: ServiceIdentity,
) -> tuple[Any, int]:
    """reference-driver + kubelet-dra-shim for ``count`` nodes, each under its identity; returns (shim
    process, shim http port)."""
    common = [
        "--node-name-prefix",
        prefix,
        "--node-count",
        str(count),
        "--fleet-root",
        str(root),
        "--log-level",
        "warning",
        "--nats-url",
        testenv.nats_url,
    ]
    await run_service(
        [str(VENV_BIN / "reference-driver"), *common, "--http-port", "0", "--gpu-count", "2"],
        kubeconfig=driver.kubeconfig,
        name=f"reference-driver-{prefix}",
    )
    port = free_port()
    _write_boot_id(root)
    process = await run_service(
        [
            str(VENV_BIN / "kubelet-dra-shim"),
            *common,
            "--http-port",
            str(port),
            "--http-host",  # loopback only: /debug/plugins needs no token (draflow_runtime.httpauth)
            "127.0.0.1",
            "--boot-id-file",
            str(root / "boot_id"),
            "--lease-renew-interval",
            "30",
            "--node-status-interval",
            "120",
        ],
        kubeconfig=shim.kubeconfig,
        name=f"kubelet-dra-shim-{prefix}",
    )
    await eventually(lambda: _registered(port, count), within=180, interval=0.5)
    return process, port


async def test_fleet_of_200_nodes_prepares_a_claim_per_node(
    kube: KubeClient, testenv: Any, run_service: Any, make_namespace: Any, short_dir: Path,
    shim_identity: ServiceIdentity, driver_identity: ServiceIdentity,
) -> None:
    prefix = f"f{uuid.uuid4().hex[:4]}-"
    # Baseline: the same binaries for one node.
    one, _ = await start_fleet(run_service, testenv, short_dir / "one", f"{prefix}solo-", 1,
                                 shim_identity, driver_identity)
    rss_one = await quiesce(lambda: rss_kib(one.pid), 1.0, 60, "the one-node shim's RSS settles")
    await one.stop()

    shim, _ = await start_fleet(run_service, testenv, short_dir / "fleet", prefix, FLEET_NODES,
                                   shim_identity, driver_identity)
    ns = await make_namespace("fleet")
    cls = await device_class(kube, DRIVER)
    nodes = [f"{prefix}{i}" for i in range(FLEET_NODES)]
    sem = asyncio.Semaphore(16)

    async def one_pod(node: str) -> None:
        async with sem:
            await claim(kube, ns, f"{node}-gpu", cls)
            p = await pod(kube, ns, node, node, [f"{node}-gpu"])
            await allocate(kube, ns, f"{node}-gpu", p, node, DRIVER, ["gpu-0"])

    await asyncio.gather(*(one_pod(n) for n in nodes))

    async def all_running() -> bool:
        pods = await kube.list(PODS, namespace=ns)
        return sum(p["status"].get("phase") == "Running" for p in pods["items"]) == FLEET_NODES

    await eventually(all_running, within=300, interval=1.0)
    sample = await kube.get(PODS, nodes[7], namespace=ns)
    ids = json.loads(sample["metadata"]["annotations"][CDI_ANNOTATION])["main"]
    validate_cdi(short_dir / "fleet" / nodes[7] / "cdi", ids)
    rss_fleet = rss_kib(shim.pid)
    per_node = (rss_fleet - rss_one) / (FLEET_NODES - 1)
    report = (
        f"kubelet-dra-shim fleet: RSS {rss_one / 1024:.1f} MiB at 1 node, {rss_fleet / 1024:.1f} MiB at "
        f"{FLEET_NODES} nodes (1 prepared claim each): {per_node:.0f} KiB per node"
    )
    print(report)
    (Path(testenv.logs_dir) / "kubelet-dra-shim-fleet-memory.txt").write_text(report + "\n")
    assert len(await kube.list(NODES, label_selector="draflow.dev/simulated=true")) > 0
    await shim.stop()
    for node in nodes:
        with contextlib.suppress(NotFound):
            await kube.delete(NODES, node)
