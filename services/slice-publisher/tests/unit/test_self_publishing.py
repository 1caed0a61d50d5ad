"""A driver that publishes its own slices (no inventory API: UNIMPLEMENTED, e.g. one on upstream's
kubeletplugin helper) is left alone while registered; when its last registration socket on the node goes,
it is reported unavailable, so that its slices are wiped after the grace as kubelet v1.37.1 does. Real
unix-socket gRPC against a registration-only test driver."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb2
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.pluginwatcher import single_node_dirs
from draflow_testenv.wait import consistently, eventually
from slice_publisher.drivers import RegistryWatcher

NODE = "node-a"
DRIVER = "self.example.com"


class Registration(reg_grpc.RegistrationServicer):
    """One driver instance: registration socket ``<driver>-<uid>-reg.sock``, no inventory service."""

    def __init__(self, root: Path, uid: str) -> None:
        self.reg = root / "plugins_registry" / f"{DRIVER}-{uid}-reg.sock"
        self._server: grpc.aio.Server | None = None

    async def GetInfo(self, request: Any, context: Any) -> reg_pb2.PluginInfo:
        return reg_pb2.PluginInfo(type="DRAPlugin", name=DRIVER, endpoint=str(self.reg),
                                  supported_versions=["v1.DRAPlugin"])

    async def start(self) -> None:
        server = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix:{self.reg}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
        self.reg.unlink(missing_ok=True)  # as upstream's helper does when it stops


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_inventory(self, node: str, driver: str, pools: list[Any]) -> None:
        self.events.append(("inventory", driver))

    def on_unavailable(self, node: str, driver: str, reason: str) -> None:
        self.events.append(("unavailable", driver))

    def on_unimplemented(self, node: str, driver: str) -> None:
        self.events.append(("unimplemented", driver))

    def on_health(self, node: str, driver: str, unhealthy: frozenset[tuple[str, str]]) -> None:
        pass


@pytest.fixture
async def watched(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, Recorder]]:
    root = tmp_path_factory.mktemp("self")
    (root / "plugins_registry").mkdir()
    rec = Recorder()
    watcher = RegistryWatcher(single_node_dirs(NODE, str(root / "plugins_registry")), rec,
                              interval=0.05, timeout=2.0, max_backoff=0.2)
    task = asyncio.create_task(watcher.run())
    try:
        yield root, rec
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_self_publishing_driver_leaving_is_reported_once_its_last_endpoint_is_gone(
    watched: tuple[Path, Recorder],
) -> None:
    root, rec = watched
    old, new = Registration(root, "old"), Registration(root, "new")
    await old.start()
    await eventually(lambda: rec.events.count(("unimplemented", DRIVER)) == 1, 5, "old found", interval=0.01)
    await new.start()
    await eventually(lambda: rec.events.count(("unimplemented", DRIVER)) == 2, 5, "new found", interval=0.01)

    # Rolling update: the old instance goes, the new one is still registered: nothing to report.
    await old.stop()
    await consistently(lambda: ("unavailable", DRIVER) not in rec.events, 0.5, "still registered")

    await new.stop()
    await eventually(lambda: ("unavailable", DRIVER) in rec.events, 5, "reported gone", interval=0.01)
