"""Finding drivers and listening to them: registration sockets, inventory streams, health streams.

:class:`RegistryWatcher` scans the registration directories (the kubelet's plugin-watcher layout,
``<dir>/<driver>-reg.sock``) every ``interval`` seconds. Each socket gets one :class:`DriverConnection`
task, restarted when the socket file is replaced (a driver restart binds a new socket) and cancelled when it
goes away. A connection that already reached the new socket by itself (it retries ``GetInfo`` by path, and
records the stamp of the socket it dialed) is kept instead: no needless unavailable/back flap. A
connection:

1. calls ``pluginregistration.Registration/GetInfo`` (the same call the kubelet makes; it does *not* call
   ``NotifyRegistrationStatus``, that is the kubelet's business) to learn the driver name and endpoint;
2. opens ``draflow.inventory.v1.Inventory/ListAndWatchResources(node_name)`` on the endpoint and hands every
   message (the driver's complete desired pools) to the listener, and, if the driver advertises a
   health service, ``NodeWatchResources`` on the same socket for device health, on the version the
   kubelet would pick (``v1.DRAResourceHealth``, else ``v1alpha1.DRAResourceHealth``:
   :func:`draflow_runtime.drahealth.choose_health_service`, shared with kubelet-dra-shim);
3. when the stream breaks or ends, reports the driver unavailable at once and tries again (GetInfo first,
   the endpoint may have moved) with capped exponential backoff;
4. a driver that answers UNIMPLEMENTED is reported once and left alone until its socket changes.

The listener's callbacks are plain functions called from the event loop; they only record state and
enqueue work (see :mod:`slice_publisher.fleet`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb2
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.drahealth import HEALTH_APIS, choose_health_service
from draflow_runtime.log import get_logger
from slice_publisher.convert import pools_from_response
from slice_publisher.splitter import DesiredPool

log = get_logger(__name__)

REG_SUFFIX = "-reg.sock"
DRA_PLUGIN_TYPE = "DRAPlugin"
HEALTH_RETRY = 5.0
#: Unix sockets need no bandwidth probing; its HTTP/2 pings time out when a loaded machine starves either
#: process, and a ping timeout kills the stream (seen at 1,000 nodes on 2 cores). Inventory messages of
#: large drivers may exceed gRPC's 4 MiB default.
CHANNEL_OPTIONS = [
    ("grpc.http2.bdp_probe", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


#: (inode, mtime in ns) of a registration socket: a driver that restarts binds a new socket, a new stamp.
Stamp = tuple[int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_mtime_ns)


class DriverListener(Protocol):
    """What a :class:`DriverConnection` reports. Called from the event loop; must not block."""

    def on_inventory(self, node: str, driver: str, pools: list[DesiredPool]) -> None: ...
    def on_unavailable(self, node: str, driver: str, reason: str) -> None: ...
    def on_unimplemented(self, node: str, driver: str) -> None: ...
    def on_health(self, node: str, driver: str, unhealthy: frozenset[tuple[str, str]]) -> None: ...


@dataclass(frozen=True)
class DriverInfo:
    name: str
    endpoint: str
    versions: tuple[str, ...]

    @property
    def health_service(self) -> str:
        """The negotiated DRAResourceHealth service, "" when the driver advertises none we speak."""
        return choose_health_service(self.versions)


async def get_info(reg_socket: str, rpc_timeout: float) -> DriverInfo:
    """``GetInfo`` on a registration socket; raises ``grpc.aio.AioRpcError`` or ``ValueError``."""
    async with grpc.aio.insecure_channel(f"unix:{reg_socket}", options=CHANNEL_OPTIONS) as channel:
        info = await reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=rpc_timeout)
    if info.type != DRA_PLUGIN_TYPE or not info.name or not info.endpoint:
        raise ValueError(
            f"not a DRA plugin: type={info.type!r} name={info.name!r} endpoint={info.endpoint!r}"
        )
    return DriverInfo(info.name, info.endpoint, tuple(info.supported_versions))


def unhealthy_devices(resp: Any, unhealthy: int, default_pool: str) -> frozenset[tuple[str, str]]:
    """(pool, device) of every device reported ``unhealthy`` (the version's UNHEALTHY value) in a full
    health list (a ``NodeWatchResourcesResponse`` of either version)."""
    return frozenset(
        (d.device.pool_name or default_pool, d.device.device_name)
        for d in resp.devices
        if d.health == unhealthy
    )


class DriverConnection:
    """One registration socket of one node; :meth:`run` until cancelled (see the module docstring)."""

    def __init__(
        self,
        node: str,
        reg_socket: str,
        listener: DriverListener,
        *,
        timeout: float,
        max_backoff: float,
        want_health: bool = True,
    ) -> None:
        self.node = node
        self.reg_socket = reg_socket
        self.driver: str | None = None
        self.health_service = ""  # negotiated at the last GetInfo; "" for none
        self.unimplemented = False
        self.connected = False
        #: (inode, mtime) of the registration socket the last GetInfo was sent to (None: not there).
        self.dialed: Stamp | None = None
        self._listener = listener
        self._timeout = timeout
        self._max_backoff = max_backoff
        self._want_health = want_health
        self._log = log.bind(node=node, socket=reg_socket)

    async def run(self) -> None:
        backoff = 0.05
        while True:
            try:
                # Stat right before dialing: the watcher keeps this connection when the socket it sees
                # is the one dialed here (a restarted driver reached by path, see RegistryWatcher.scan).
                self.dialed = None
                self.dialed = stamp_of(os.stat(self.reg_socket))
                info = await get_info(self.reg_socket, self._timeout)
            except (grpc.aio.AioRpcError, ValueError, OSError) as exc:
                self.lost(f"GetInfo failed: {_describe(exc)}")
            else:
                if (self.driver, self.health_service) != (info.name, info.health_service):
                    self._log.info(
                        "driver found",
                        driver=info.name,
                        endpoint=info.endpoint,
                        health=info.health_service or "none",
                    )
                self.driver = info.name
                self.health_service = info.health_service
                if await self._stream(info):
                    backoff = 0.05
                if self.unimplemented:
                    await asyncio.Event().wait()  # left alone until the socket changes (task cancelled)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    def lost(self, reason: str) -> None:
        if self.driver is not None and self.connected:
            self._log.warning("driver unavailable", driver=self.driver, reason=reason)
            self._listener.on_unavailable(self.node, self.driver, reason)
        self.connected = False

    async def _stream(self, info: DriverInfo) -> bool:
        """Run the inventory stream until it ends; True if it delivered at least one message."""
        delivered = False
        health: asyncio.Task[None] | None = None
        async with grpc.aio.insecure_channel(f"unix:{info.endpoint}", options=CHANNEL_OPTIONS) as channel:
            try:
                call = inv_grpc.InventoryStub(channel).ListAndWatchResources(
                    inv.ListAndWatchResourcesRequest(node_name=self.node)
                )
                async for resp in call:
                    if resp.driver and resp.driver != info.name:
                        self._log.warning("inventory names another driver", driver=info.name, got=resp.driver)
                    pools = pools_from_response(resp, info.name, self.node)
                    self.connected = delivered = True
                    self._listener.on_inventory(self.node, info.name, pools)
                    if health is None and self._want_health and info.health_service:
                        health = asyncio.create_task(self._health(channel, info.name, info.health_service))
                self.lost("inventory stream ended")
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    self.unimplemented = True
                    self._log.info("driver has no inventory API, leaving it alone", driver=info.name)
                    self._listener.on_unimplemented(self.node, info.name)
                else:
                    self.lost(f"inventory stream broke: {_describe(exc)}")
            finally:
                if health is not None:
                    health.cancel()
                    # gather, not `suppress(CancelledError): await health`: that would also swallow a
                    # cancellation of this task arriving meanwhile, and the connection would never stop.
                    await asyncio.gather(health, return_exceptions=True)
        return delivered

    async def _health(self, channel: grpc.aio.Channel, driver: str, service: str) -> None:
        messages, grpc_module = HEALTH_APIS[service]
        stub = grpc_module.DRAResourceHealthStub(channel)
        while True:
            try:
                async for resp in stub.NodeWatchResources(messages.NodeWatchResourcesRequest()):
                    unhealthy = unhealthy_devices(resp, messages.UNHEALTHY, self.node)
                    self._listener.on_health(self.node, driver, unhealthy)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    self._log.info("health service advertised but not served", driver=driver, service=service)
                    return
                self._log.info("health stream broke", driver=driver, service=service, error=_describe(exc))
            # Like the kubelet: forget the health of a driver whose stream ended, retry later.
            self._listener.on_health(self.node, driver, frozenset())
            await asyncio.sleep(HEALTH_RETRY)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return repr(exc)


# ------------------------------------------------------------------------------------------- registry


def single_node_dirs(node: str, registry_dir: str) -> Callable[[], dict[str, Path]]:
    return lambda: {node: Path(registry_dir)}


def fleet_dirs(root: str) -> Callable[[], dict[str, Path]]:
    """Every ``<root>/<node>/plugins_registry`` that exists now."""

    def scan() -> dict[str, Path]:
        out: dict[str, Path] = {}
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(root):
                reg = Path(entry.path) / "plugins_registry"
                if entry.is_dir() and reg.is_dir():
                    out[entry.name] = reg
        return out

    return scan


class RegistryWatcher:
    """Polls registration directories and keeps one :class:`DriverConnection` per socket."""

    def __init__(
        self,
        dirs: Callable[[], dict[str, Path]],
        listener: DriverListener,
        *,
        interval: float,
        timeout: float,
        max_backoff: float,
        want_health: bool = True,
    ) -> None:
        self._dirs = dirs
        self._listener = listener
        self._interval = interval
        self._timeout = timeout
        self._max_backoff = max_backoff
        self._want_health = want_health
        self._conns: dict[tuple[str, str], tuple[Stamp, DriverConnection, asyncio.Task[None]]] = {}
        self.nodes: set[str] = set()
        self.scanned = asyncio.Event()

    def connections(self) -> list[DriverConnection]:
        return [c for _, c, _ in self._conns.values()]

    async def run(self) -> None:
        try:
            while True:
                self.scan()
                self.scanned.set()
                await asyncio.sleep(self._interval)
        finally:
            for _, _, task in self._conns.values():
                task.cancel()
            await asyncio.gather(*(t for _, _, t in self._conns.values()), return_exceptions=True)
            self._conns.clear()

    def _sockets(self) -> dict[tuple[str, str], Stamp]:
        found: dict[tuple[str, str], Stamp] = {}
        dirs = self._dirs()
        self.nodes = set(dirs)
        for node, d in dirs.items():
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                for entry in os.scandir(d):
                    if entry.name.endswith(REG_SUFFIX):
                        with contextlib.suppress(FileNotFoundError):
                            found[(node, entry.path)] = stamp_of(entry.stat())
        return found

    def scan(self) -> None:
        """One pass: start connections for new or replaced sockets, stop those whose socket vanished.

        A replaced socket whose connection already streams from it (the connection retried GetInfo by
        path and reached the restarted driver before this pass saw the new socket) is kept: restarting
        it would report the driver unavailable and back again, a taint flap the allocator sees.
        """
        found = self._sockets()
        for key, (stamp, conn, task) in list(self._conns.items()):
            now = found.get(key)
            if now == stamp:
                continue
            if now is not None and conn.connected and conn.dialed == now:
                self._conns[key] = (now, conn, task)
                continue
            task.cancel()
            del self._conns[key]
            if not conn.unimplemented:
                conn.lost(
                    "registration socket removed" if key not in found else "registration socket replaced"
                )
        for key, stamp in found.items():
            if key in self._conns:
                continue
            node, path = key
            conn = DriverConnection(
                node,
                path,
                self._listener,
                timeout=self._timeout,
                max_backoff=self._max_backoff,
                want_health=self._want_health,
            )
            task = asyncio.create_task(conn.run(), name=f"driver-{node}-{Path(path).name}")
            self._conns[key] = (stamp, conn, task)
