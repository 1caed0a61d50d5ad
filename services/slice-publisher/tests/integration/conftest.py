"""Helpers for slice-publisher integration tests: a real reference-driver process per node, the publisher
running in this test's event loop (so tests read its per-process counters), and API polling.

Every test using ``harness`` runs twice (fixture ``service_identity``): as the admin, and with the publisher
holding only its deploy/kustomize identity (RBAC plus the own-node admission policy, token bound to a pod
on the test's node) and the driver only its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from draflow_runtime.kube import NODES, RESOURCE_SLICES, KubeClient
from draflow_runtime.pluginwatcher import get_info
from draflow_testenv.identity import ServiceIdentity
from slice_publisher.fleet import Publisher
from slice_publisher.settings import PublisherSettings

DRIVER = "gpu.draflow.example"
REFERENCE_DRIVER = shutil.which("reference-driver") or str(
    Path(os.sys.executable).parent / "reference-driver"
)


@dataclass
class NodeDirs:
    node: str
    root: Path

    @property
    def registry(self) -> Path:
        return self.root / "plugins_registry"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.json"

    def set_gpus(self, count: int) -> None:
        tmp = self.inventory.with_suffix(".tmp")
        tmp.write_text(json.dumps({"gpuCount": count}))
        tmp.rename(self.inventory)

    def set_unhealthy(self, devices: list[str]) -> None:
        state = self.root / "state"
        state.mkdir(parents=True, exist_ok=True)
        tmp = state / "health.json.tmp"
        tmp.write_text(
            json.dumps({"devices": {d: {"health": "Unhealthy", "message": "test"} for d in devices}})
        )
        tmp.rename(state / "health.json")


@dataclass
class Harness:
    kube: KubeClient  # admin: the test's own set-up and checks
    run_service: Callable[..., Awaitable[Any]]
    dirs: NodeDirs
    publisher_identity: ServiceIdentity
    driver_identity: ServiceIdentity
    publishers: list[tuple[Publisher, asyncio.Task[None]]] = field(default_factory=list)

    async def start_driver(self, *extra: str) -> Any:
        d = self.dirs
        proc = await self.run_service(
            [
                REFERENCE_DRIVER,
                "--node-name",
                d.node,
                "--registry-dir",
                str(d.registry),
                "--plugins-dir",
                str(d.root / "plugins"),
                "--cdi-root",
                str(d.root / "cdi"),
                "--state-dir",
                str(d.root / "state"),
                "--inventory-file",
                str(d.inventory),
                "--poll-interval",
                "0.1",
                "--http-port",
                "0",
                "--nats-url",
                "",
                *extra,
            ],
            kubeconfig=self.driver_identity.kubeconfig,
            name=f"reference-driver-{d.node}",
        )
        sock = d.registry / f"{DRIVER}-reg.sock"
        await proc.wait_ready(lambda: _answers(sock), timeout=60)
        return proc

    async def start_publisher(
        self, *, bus: Any = None, tracer_provider: Any = None, **overrides: Any
    ) -> Publisher:
        settings = PublisherSettings(
            node_name=self.dirs.node,
            registry_dir=str(self.dirs.registry),
            registry_poll_interval=0.1,
            startup_grace=overrides.pop("startup_grace", 1.0),
            http_port=0,
            nats_url="",
            **overrides,
        )
        pub = Publisher(self.publisher_identity.kube, settings, bus=bus, tracer_provider=tracer_provider)
        task = asyncio.create_task(pub.run())
        self.publishers.append((pub, task))
        return pub

    async def stop_publisher(self, pub: Publisher) -> None:
        for p, task in self.publishers:
            if p is pub:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def slices(self) -> list[dict[str, Any]]:
        lst = await self.kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={self.dirs.node}")
        return sorted(lst["items"], key=lambda s: s["metadata"]["name"])


async def _answers(path: Path) -> bool:
    """The driver's registration socket answers GetInfo (a stale socket of a killed driver does not)."""
    await get_info(str(path), 1.0)
    return True


async def settled(pub: Publisher, driver_seen: bool = True) -> bool:
    """The publisher finished its start-up, heard from the driver, and has no work queued or running."""
    if not pub.startup_cleaned.is_set():
        return False
    if driver_seen and not any(not s.unavailable for s in pub.drivers.states.values()):
        return False
    return len(pub.queue) == 0 and not pub.queue.processing()


@pytest_asyncio.fixture(loop_scope="session")
async def harness(
    kube: KubeClient, run_service: Any, tmp_path_factory: pytest.TempPathFactory,
    make_namespace: Callable[..., Awaitable[str]],
    service_identity: Callable[..., Awaitable[ServiceIdentity]],
) -> AsyncIterator[Harness]:
    node = f"sp-{uuid.uuid4().hex[:8]}"
    # Unix socket paths are limited to 108 bytes: keep the root short.
    root = Path(tmp_path_factory.mktemp("sp", numbered=True))
    namespace = await make_namespace("sp")
    await kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    publishers: list[tuple[Publisher, asyncio.Task[None]]] = []
    try:
        h = Harness(kube, run_service, NodeDirs(node, root),
                    await service_identity("slice-publisher", namespace, node=node),
                    await service_identity("reference-driver", namespace), publishers)
        h.dirs.set_gpus(8)
        yield h
    finally:
        for _pub, task in publishers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
        with contextlib.suppress(Exception):
            await kube.delete(NODES, node)
