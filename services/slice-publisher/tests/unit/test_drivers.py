"""Registry watcher and driver connections over real unix-socket gRPC, against a tiny test-only driver."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb2
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.drahealth import HEALTH_APIS, HEALTH_SERVICES, HEALTH_V1, HEALTH_V1ALPHA1
from draflow_runtime.pluginwatcher import single_node_dirs
from draflow_testenv.wait import consistently, eventually
from slice_publisher.drivers import DriverConnection, RegistryWatcher

NODE = "node-a"


class FakeDriver(reg_grpc.RegistrationServicer, inv_grpc.InventoryServicer):
    """Registration + (optionally) Inventory and the DRAResourceHealth versions in ``health`` (advertised
    and served); inventory and health change with :meth:`set`."""

    def __init__(
        self, root: Path, name: str, *, inventory: bool = True, health: tuple[str, ...] = HEALTH_SERVICES
    ) -> None:
        self.name = name
        self.reg = root / "plugins_registry" / f"{name}-reg.sock"
        self.dra = root / "plugins" / name / "dra.sock"
        self.inventory = inventory
        self.health = health
        self.health_streams: list[str] = []  # the service of every NodeWatchResources call, in order
        self.devices = 2
        self.unhealthy: list[str] = []
        self.get_info_calls = 0
        self.endpoint: str | None = None  # what GetInfo announces; None: the dra.sock
        self.version = 0
        self._changed = asyncio.Condition()
        self._server: grpc.aio.Server | None = None

    async def GetInfo(self, request: Any, context: Any) -> reg_pb2.PluginInfo:
        self.get_info_calls += 1
        return reg_pb2.PluginInfo(
            type="DRAPlugin",
            name=self.name,
            endpoint=str(self.dra) if self.endpoint is None else self.endpoint,
            supported_versions=["v1.DRAPlugin", *self.health],
        )

    def _message(self) -> inv.ListAndWatchResourcesResponse:
        devices = [inv.Device(name=f"gpu-{i}") for i in range(self.devices)]
        return inv.ListAndWatchResourcesResponse(
            driver=self.name, node_name=NODE, pools=[inv.Pool(name=NODE, devices=devices)]
        )

    async def _next_change(self, seen: int) -> int:
        async with self._changed:
            await self._changed.wait_for(lambda: self.version != seen)
        return self.version

    async def ListAndWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:
        seen = self.version
        while True:
            yield self._message()
            seen = await self._next_change(seen)

    def health_servicer(self, service: str) -> Any:
        messages = HEALTH_APIS[service][0]
        driver = self

        class Health:
            async def NodeWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:
                driver.health_streams.append(service)
                seen = driver.version
                while True:
                    yield messages.NodeWatchResourcesResponse(
                        devices=[
                            messages.DeviceHealth(
                                device=messages.DeviceIdentifier(pool_name=NODE, device_name=d),
                                health=messages.UNHEALTHY,
                            )
                            for d in driver.unhealthy
                        ]
                    )
                    seen = await driver._next_change(seen)

        return Health()

    async def set(self, devices: int | None = None, unhealthy: list[str] | None = None) -> None:
        self.devices = self.devices if devices is None else devices
        self.unhealthy = self.unhealthy if unhealthy is None else unhealthy
        async with self._changed:
            self.version += 1
            self._changed.notify_all()

    async def start(self) -> None:
        self.reg.parent.mkdir(parents=True, exist_ok=True)
        self.dra.parent.mkdir(parents=True, exist_ok=True)
        server = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(self, server)
        if self.inventory:
            inv_grpc.add_InventoryServicer_to_server(self, server)
            for service in self.health:
                HEALTH_APIS[service][1].add_DRAResourceHealthServicer_to_server(
                    self.health_servicer(service), server
                )
        server.add_insecure_port(f"unix:{self.reg}")
        server.add_insecure_port(f"unix:{self.dra}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.reasons: list[str] = []

    def _add(self, kind: str, value: Any) -> None:
        self.events.append((kind, value))

    def on_inventory(self, node: str, driver: str, pools: list[Any]) -> None:
        self._add("inventory", (driver, [len(p.devices) for p in pools]))

    def on_unavailable(self, node: str, driver: str, reason: str) -> None:
        self.reasons.append(reason)
        self._add("unavailable", driver)

    def on_unimplemented(self, node: str, driver: str) -> None:
        self._add("unimplemented", driver)

    def on_health(self, node: str, driver: str, unhealthy: frozenset[tuple[str, str]]) -> None:
        self._add("health", sorted(d for _, d in unhealthy))

    async def wait_for(self, kind: str, value: Any, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        def seen() -> bool:
            assert (kind, value) in self.events, f"no {(kind, value)} in {self.events}"
            return True

        await eventually(seen, timeout, f"{kind} {value!r}", interval=0.01)


@pytest.fixture
async def watched(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, Recorder]]:
    root = tmp_path_factory.mktemp("drv")
    (root / "plugins_registry").mkdir()
    rec = Recorder()
    watcher = RegistryWatcher(
        single_node_dirs(NODE, str(root / "plugins_registry")),
        rec,
        interval=0.05,
        timeout=2.0,
        max_backoff=0.2,
    )
    task = asyncio.create_task(watcher.run())
    try:
        yield root, rec
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_inventory_changes_and_health_are_delivered(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com")
    await drv.start()
    try:
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
        await drv.set(devices=5)
        await rec.wait_for("inventory", ("gpu.example.com", [5]))
        await drv.set(unhealthy=["gpu-1"])
        await rec.wait_for("health", ["gpu-1"])
    finally:
        await drv.stop()


async def test_a_stopped_driver_is_reported_at_once_and_found_again(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com")
    await drv.start()
    await rec.wait_for("inventory", ("gpu.example.com", [2]))
    await drv.stop()
    await rec.wait_for("unavailable", "gpu.example.com")
    # At once: the end of the inventory stream says so, no poll or GetInfo timeout is waited for.
    assert rec.reasons[0].startswith("inventory stream"), rec.reasons
    rec.events.clear()
    drv2 = FakeDriver(root, "gpu.example.com")
    await drv2.start()
    try:
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
    finally:
        await drv2.stop()


async def test_unimplemented_driver_is_reported_once_and_left_alone(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    drv = FakeDriver(root, "legacy.example.com", inventory=False)
    await drv.start()
    try:
        await rec.wait_for("unimplemented", "legacy.example.com")

        def left_alone() -> bool:
            return rec.events.count(("unimplemented", "legacy.example.com")) == 1 and \
                drv.get_info_calls == 1 and not [e for e in rec.events if e[0] == "unavailable"]

        await consistently(left_alone, 0.5, "reported once, not asked again")
        assert rec.events.count(("unimplemented", "legacy.example.com")) == 1
        assert drv.get_info_calls == 1
        assert not [e for e in rec.events if e[0] == "unavailable"]
    finally:
        await drv.stop()


async def test_removed_registration_socket_reports_the_driver_gone(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com")
    await drv.start()
    try:
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
        drv.reg.unlink()
        await rec.wait_for("unavailable", "gpu.example.com")
    finally:
        await drv.stop()


async def test_a_connection_cancelled_while_its_health_stream_winds_down_stops(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the cancellation of a connection that arrived while it waited for its health task to
    finish was swallowed, so the connection kept reconnecting and its watcher never stopped."""
    root = tmp_path_factory.mktemp("drv")
    winding_down = asyncio.Event()

    async def slow_to_stop_health(self: DriverConnection, channel: Any, driver: str, service: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            winding_down.set()
            await asyncio.sleep(0.5)  # the fake's slow wind-down: the window the regression needs
            raise

    monkeypatch.setattr(DriverConnection, "_health", slow_to_stop_health)
    drv = FakeDriver(root, "gpu.example.com")
    await drv.start()
    rec = Recorder()
    conn = DriverConnection(NODE, str(drv.reg), rec, timeout=2.0, max_backoff=0.2, want_health=True)
    task = asyncio.create_task(conn.run())
    await rec.wait_for("inventory", ("gpu.example.com", [2]))
    await drv.stop()  # the inventory stream ends; the connection cancels its health task and waits
    await asyncio.wait_for(winding_down.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done == {task} and task.cancelled()


def _stale_socket(path: Path) -> None:
    """What a SIGKILLed driver leaves behind: a socket file nobody listens on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))


async def test_a_connection_that_reached_the_restarted_driver_is_kept_when_the_socket_is_replaced(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Regression (CI, under load): the driver was killed, its dead socket stayed; the restarted driver
    replaced it; the connection retrying GetInfo by path reached the new driver ("back") before the next
    scan saw the new socket, and that scan restarted the connection: unavailable and back once more, a
    needless taint flap. Scans are run by hand here, so the order is the racy one every time."""
    root = tmp_path_factory.mktemp("drv")
    (root / "plugins_registry").mkdir()
    rec = Recorder()
    watcher = RegistryWatcher(
        single_node_dirs(NODE, str(root / "plugins_registry")),
        rec,
        interval=3600.0,  # one scan at start; the others are this test's calls to sync()
        timeout=2.0,
        max_backoff=0.1,
    )
    drv = FakeDriver(root, "gpu.example.com")
    await drv.start()
    task = asyncio.create_task(watcher.run())
    drv2 = FakeDriver(root, "gpu.example.com")
    try:
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
        [conn] = watcher.connections()
        await drv.stop()  # removes its socket; a killed driver's stays: put a dead one there
        _stale_socket(drv.reg)
        await rec.wait_for("unavailable", "gpu.example.com")
        rec.events.clear()
        rec.reasons.clear()

        await drv2.start()  # unlinks the dead socket, binds a new one at the same path
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
        assert conn.connected
        for _ in range(3):
            await watcher.sync()
        assert [e for e in rec.events if e[0] == "unavailable"] == [], rec.reasons
        assert watcher.connections() == [conn]
        await drv2.set(devices=3)  # the kept connection still streams
        await rec.wait_for("inventory", ("gpu.example.com", [3]))
        assert [e for e in rec.events if e[0] in ("inventory", "unavailable")] == [
            ("inventory", ("gpu.example.com", [2])),
            ("inventory", ("gpu.example.com", [3])),
        ]
        assert drv2.get_info_calls == 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await drv2.stop()


@pytest.mark.parametrize(
    ("served", "negotiated"),
    [
        pytest.param((HEALTH_V1,), HEALTH_V1, id="v1-only"),
        pytest.param((HEALTH_V1ALPHA1,), HEALTH_V1ALPHA1, id="v1alpha1-only"),
        pytest.param((HEALTH_V1, HEALTH_V1ALPHA1), HEALTH_V1, id="both"),
        pytest.param((HEALTH_V1ALPHA1, HEALTH_V1), HEALTH_V1, id="both-v1alpha1-listed-first"),
    ],
)
async def test_health_is_watched_on_the_version_the_kubelet_would_pick(
    watched: tuple[Path, Recorder], served: tuple[str, ...], negotiated: str
) -> None:
    """v1 first, v1alpha1 second, whatever the driver's order (kubelet v1.37.1, like kubelet-dra-shim);
    a driver serving only v1 gets its unhealthy devices reported too."""
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com", health=served)
    drv.unhealthy = ["gpu-1"]
    await drv.start()
    try:
        await rec.wait_for("health", ["gpu-1"])
        await drv.set(unhealthy=[])
        await rec.wait_for("health", [])
        assert drv.health_streams == [negotiated]
    finally:
        await drv.stop()


# --- kubelet v1.37.1's file rules (draflow_runtime.pluginwatcher), each a difference the publisher had ---


async def test_a_socket_not_named_reg_sock_is_a_driver_too(watched: tuple[Path, Recorder]) -> None:
    """The kubelet registers any socket in the directory (``-reg.sock`` is a convention); the publisher
    looked only at ``*-reg.sock`` and never saw such a driver."""
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com")
    drv.reg = root / "plugins_registry" / "gpu.example.com.sock"
    await drv.start()
    try:
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
    finally:
        await drv.stop()


async def test_a_dot_file_socket_is_not_a_driver(watched: tuple[Path, Recorder]) -> None:
    """The kubelet ignores names starting with '.'; the publisher streamed from ``.<x>-reg.sock``."""
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com")
    drv.reg = root / "plugins_registry" / ".gpu.example.com-reg.sock"
    await drv.start()
    try:
        await consistently(lambda: drv.get_info_calls == 0 and not rec.events, 0.5, "the dot-file ignored")
    finally:
        await drv.stop()


async def test_an_empty_endpoint_means_the_registration_socket(watched: tuple[Path, Recorder]) -> None:
    """The kubelet dials the registration socket when GetInfo names no endpoint; the publisher refused
    such a driver ("not a DRA plugin")."""
    root, rec = watched
    drv = FakeDriver(root, "gpu.example.com")
    drv.endpoint = ""
    await drv.start()
    try:
        await rec.wait_for("inventory", ("gpu.example.com", [2]))
    finally:
        await drv.stop()
