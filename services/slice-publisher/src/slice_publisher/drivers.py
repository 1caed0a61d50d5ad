"""Finding drivers and listening to them: registration sockets, inventory streams, health streams.

:class:`RegistryWatcher` is the runtime's plugin-registry watcher (:mod:`draflow_runtime.pluginwatcher`:
kubelet v1.37.1's rules, the ones kubelet-dra-shim uses too: any unix socket under the directory that is
not a dot-file, identity = socket path, a socket created again is a new registration) with
:class:`DriverConnections` as its handler: each socket gets one :class:`DriverConnection` task, restarted
when the socket file is replaced (a driver restart binds a new socket) and cancelled when it goes away. A
connection that already reached the new socket by itself (it retries ``GetInfo`` by path, and records the
stamp of the socket it dialed) is kept instead: no needless unavailable/back flap. A connection:

1. calls ``pluginregistration.Registration/GetInfo`` (the same call the kubelet makes; it does *not* call
   ``NotifyRegistrationStatus``, that is the kubelet's business) to learn the driver name and endpoint;
2. opens ``draflow.inventory.v1.Inventory/ListAndWatchResources(node_name)`` on the endpoint and hands every
   message (the driver's complete desired pools) to the listener, and, if the driver advertises a
   health service, ``NodeWatchResources`` on the same socket for device health, on the version the
   kubelet would pick (``v1.DRAResourceHealth``, else ``v1alpha1.DRAResourceHealth``), with the health
   client kubelet-dra-shim uses too (:func:`draflow_runtime.drahealth.watch_health`);
3. when the stream breaks or ends, reports the driver unavailable at once and tries again (GetInfo first,
   the endpoint may have moved) with capped exponential backoff;
4. a driver that answers UNIMPLEMENTED is reported once and left alone until its socket changes.

The listener's callbacks are plain functions called from the event loop; they only record state and
enqueue work (see :mod:`slice_publisher.fleet`).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import grpc

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_runtime.drahealth import DeviceReport, choose_health_service, watch_health
from draflow_runtime.log import get_logger
from draflow_runtime.pluginwatcher import (
    PluginInfo,
    PluginWatcher,
    SocketKey,
    Stamp,
    check_dra_plugin,
    get_info,
    stamp_of,
)
from draflow_runtime.reconcile import Done
from slice_publisher.convert import pools_from_response
from slice_publisher.splitter import DesiredPool

log = get_logger(__name__)

#: Unix sockets need no bandwidth probing; its HTTP/2 pings time out when a loaded machine starves either
#: process, and a ping timeout kills the stream (seen at 1,000 nodes on 2 cores). Inventory messages of
#: large drivers may exceed gRPC's 4 MiB default.
CHANNEL_OPTIONS = [
    ("grpc.http2.bdp_probe", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


class DriverListener(Protocol):
    """What a :class:`DriverConnection` reports. Called from the event loop; must not block."""

    def on_inventory(self, node: str, driver: str, pools: list[DesiredPool]) -> None: ...
    def on_unavailable(self, node: str, driver: str, reason: str) -> None: ...
    def on_unimplemented(self, node: str, driver: str) -> None: ...
    def on_health(self, node: str, driver: str, unhealthy: frozenset[tuple[str, str]]) -> None: ...


def unhealthy_devices(devices: list[DeviceReport], default_pool: str) -> frozenset[tuple[str, str]]:
    """(pool, device) of every device reported Unhealthy in a full health list."""
    return frozenset((d.pool or default_pool, d.device) for d in devices if d.state == "Unhealthy")


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
                # is the one dialed here (a restarted driver reached by path, see DriverConnections).
                self.dialed = None
                self.dialed = stamp_of(os.stat(self.reg_socket))
                _check_listening(self.reg_socket)
                info = await get_info(self.reg_socket, self._timeout, options=CHANNEL_OPTIONS)
                check_dra_plugin(info)
            except (grpc.aio.AioRpcError, ValueError, OSError) as exc:
                self.lost(f"GetInfo failed: {_describe(exc)}")
            else:
                health_service = choose_health_service(info.versions)
                if (self.driver, self.health_service) != (info.name, health_service):
                    self._log.info(
                        "driver found",
                        driver=info.name,
                        endpoint=info.endpoint,
                        health=health_service or "none",
                    )
                self.driver = info.name
                self.health_service = health_service
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

    async def _stream(self, info: PluginInfo) -> bool:
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
                    if health is None and self._want_health and self.health_service:
                        health = asyncio.create_task(self._health(channel, info.name, self.health_service))
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
        def report(devices: list[DeviceReport]) -> None:
            self._listener.on_health(self.node, driver, unhealthy_devices(devices, self.node))

        def lost() -> None:
            # Like the kubelet: forget the health of a driver whose stream ended, retry later.
            self._listener.on_health(self.node, driver, frozenset())

        await watch_health(channel, service, report, lost, node=self.node, driver=driver)


def _check_listening(path: str) -> None:
    """Raise ``ConnectionRefusedError`` unless a process accepts connections on the unix socket ``path``.

    A plain connect, no gRPC: a killed driver leaves its socket files behind, and retrying GetInfo on
    them (a gRPC channel per attempt) took a fifth of the publisher's CPU while 400 nodes lost their
    driver at once (py-spy), competing with the very slice writes that taint their devices.
    """
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(path)
    except BlockingIOError:
        return  # the listener's backlog is full: it is there
    finally:
        probe.close()


def accepts_connections(path: str) -> bool:
    """Does a process listen on the unix socket ``path``? (One ``connect``, see :func:`_check_listening`.)"""
    try:
        _check_listening(path)
    except OSError:
        return False
    return True


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return repr(exc)


# ------------------------------------------------------------------------------------------- registry


class DriverConnections:
    """The registry watcher's handler: one :class:`DriverConnection` task per registration socket."""

    def __init__(
        self, listener: DriverListener, *, timeout: float, max_backoff: float, want_health: bool = True
    ) -> None:
        self._listener = listener
        self._timeout = timeout
        self._max_backoff = max_backoff
        self._want_health = want_health
        self._conns: dict[SocketKey, tuple[Stamp, DriverConnection, asyncio.Task[None]]] = {}

    def connections(self) -> list[DriverConnection]:
        return [c for _, c, _ in self._conns.values()]

    async def sync_socket(self, node: str, path: str, stamp: Stamp | None) -> Done:
        """Start a connection for a new or replaced socket, stop the one of a vanished socket.

        A replaced socket whose connection already streams from it (the connection retried GetInfo by
        path and reached the restarted driver before the watcher saw the new socket) is kept:
        restarting it would report the driver unavailable and back again, a taint flap the allocator
        sees.
        """
        key = (node, path)
        entry = self._conns.get(key)
        if entry is not None:
            old, conn, task = entry
            if old == stamp:
                return Done()
            if stamp is not None and conn.connected and conn.dialed == stamp:
                self._conns[key] = (stamp, conn, task)
                return Done()
            task.cancel()
            del self._conns[key]
            if not conn.unimplemented:
                conn.lost("registration socket removed" if stamp is None else "registration socket replaced")
            elif stamp is None and conn.driver is not None and not self._registered(node, conn.driver):
                # A self-publishing driver's last endpoint on the node is gone (a rolling update's other
                # instance keeps it registered): the kubelet wipes its slices after a delay.
                self._listener.on_unavailable(node, conn.driver, "registration socket removed")
        if stamp is not None:
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
        return Done()

    def _registered(self, node: str, driver: str) -> bool:
        """Does another registration socket of ``node`` still lead to ``driver``?"""
        return any(n == node and c.driver == driver for (n, _), (_, c, _) in self._conns.items())

    async def close(self) -> None:
        tasks = [t for _, _, t in self._conns.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._conns.clear()


class RegistryWatcher(PluginWatcher):
    """The runtime's registry watcher with :class:`DriverConnections` as its handler."""

    def __init__(
        self,
        dirs: Callable[[], Mapping[str, Path]],
        listener: DriverListener,
        *,
        interval: float,
        timeout: float,
        max_backoff: float,
        want_health: bool = True,
    ) -> None:
        self.drivers = DriverConnections(
            listener, timeout=timeout, max_backoff=max_backoff, want_health=want_health
        )
        super().__init__(dirs, self.drivers, interval=interval, name="slice-publisher-registry")

    def connections(self) -> list[DriverConnection]:
        return self.drivers.connections()

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self.close()
