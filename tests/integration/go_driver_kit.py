"""Shared by the tests that run hack/go-dra-driver and hack/go-api-check against draflow."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from draflow_testenv.binaries import ensure_binary
from draflow_testenv.fleetflow import DRIVER, ServiceFlow


def journal(path: Path, op: str) -> list[dict[str, Any]]:
    """The driver's journal entries of kind ``op``, oldest first."""
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["op"] == op]


async def start_driver(run_service: Callable[..., Awaitable[Any]], fleet: Path, node: str, *args: str,
                       journal: str = "go-driver.jsonl") -> Any:
    """The Go driver for ``node``, in the fleet layout kubelet-dra-shim serves, with more flags ``args``;
    it journals to ``<fleet>/<node>/<journal>``."""
    binary = await ensure_binary("go-dra-driver")
    root = fleet / node
    return await run_service([
        str(binary), "--driver-name", DRIVER, "--node-name", node,
        "--registry-dir", str(root / "plugins_registry"), "--plugin-dir", str(root / "plugins" / DRIVER),
        "--cdi-dir", str(root / "cdi"), "--journal", str(root / journal), "--devices", "4",
        "--health-interval", "2s", *args,
    ], name=f"go-dra-driver-{node}")


async def go_api_check(testenv: Any, flow: ServiceFlow) -> dict[str, Any]:
    """hack/go-api-check over what the flow wrote: a Go client's strict decoding and upstream's validation
    of the namespace's claims, pods and Events, the nodes' Leases and slices, the flow's DeviceTaintRules
    and ResourcePoolStatusRequests (``--name-prefix``)."""
    binary = await ensure_binary("go-api-check")
    argv = [str(binary), "--kubeconfig", str(testenv.kubeconfig), "--namespace", flow.ns,
            "--lease-namespace", "kube-node-lease", "--name-prefix", flow.prefix,
            "--feature-gates", ",".join(f"{g}=true" for g in testenv.feature_gates)]
    for node in flow.nodes:
        argv += ["--node", node]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    report: dict[str, Any] = json.loads(out)
    return report
