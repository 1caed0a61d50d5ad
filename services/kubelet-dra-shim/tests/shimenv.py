"""The shim's integration-test environment: one simulated node with a test-only driver (real unix sockets,
real files) and the shims started on it; fixture ``env``, registered by conftest for every test module."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_asyncio
from fakedriver import HEALTH_BOTH, FakeDriver

from draflow_runtime.errors import NotFound
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import NODES, PODS, KubeClient
from draflow_testenv.identity import ServiceIdentity
from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.fleet import Fleet
from kubelet_dra_shim.settings import ShimSettings

DRIVER = "gpu.shimtest.example"


@dataclass
class Env:
    kube: KubeClient  # admin: the test's set-up and checks (and the stand-in driver)
    shim_kube: KubeClient  # the shim's: admin, or only its RBAC (fixture shim_identity)
    root: Path
    node: str
    driver: FakeDriver
    fleets: list[Fleet] = field(default_factory=list)

    @property
    def cdi_root(self) -> Path:
        return self.root / self.node / "cdi"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / self.node / "kubelet" / checkpoint.FILE_NAME

    def settings(self, **overrides: Any) -> ShimSettings:
        values: dict[str, Any] = {
            "nodes": self.node,
            "fleet_root": str(self.root),
            "http_port": 0,
            "nats_url": "",
            "boot_id_file": str(self.root / "boot_id"),
            "lease_renew_interval": 2.0,
            "registry_poll_interval": 0.1,
            "resync_interval": 2.0,
        }
        values.update(overrides)
        return ShimSettings(**values)

    async def start_shim(self, **overrides: Any) -> Fleet:
        fleet = Fleet(self.settings(**overrides), self.shim_kube,
                      EventRecorder(self.shim_kube, "kubelet-dra-shim"))
        await fleet.start()
        self.fleets.append(fleet)
        return fleet

    async def stop_shim(self) -> None:
        while self.fleets:
            await self.fleets.pop().stop()

    def checkpoint(self) -> checkpoint.CheckpointState:
        state = checkpoint.read(self.checkpoint_path)
        assert state is not None
        return state


@pytest_asyncio.fixture(loop_scope="session")
async def env(kube: KubeClient, short_dir: Path, shim_identity: ServiceIdentity) -> AsyncIterator[Env]:
    node = f"shim-{uuid.uuid4().hex[:6]}"
    (short_dir / "boot_id").write_text("boot-1\n")
    d = short_dir / node
    driver = FakeDriver(DRIVER, d / "plugins_registry", d / "plugins", d / "cdi", kube, health=HEALTH_BOTH)
    await driver.start()
    e = Env(kube, shim_identity.kube, short_dir, node, driver)
    try:
        yield e
    finally:
        await e.stop_shim()
        await driver.stop()
        with contextlib.suppress(NotFound):
            await kube.delete(NODES, node)


async def _running(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    p = await kube.get(PODS, name, namespace=ns)
    assert p.get("status", {}).get("phase") == "Running", p.get("status")
    return p


async def _gone(kube: KubeClient, res: Any, name: str, ns: str) -> bool:
    try:
        await kube.get(res, name, namespace=ns)
    except NotFound:
        return True
    return False
