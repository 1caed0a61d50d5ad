"""Plugin registration: the registry-directory watcher and the store of registered DRA plugins.

A driver announces itself by creating ``<registry dir>/<driver>[-<uid>]-reg.sock`` serving the kubelet
``pluginregistration.Registration`` service. For each socket that appears the watcher calls ``GetInfo``,
checks the type (``DRAPlugin``), picks the first entry of the plugin's ``supported_versions`` that the
shim speaks (``v1.DRAPlugin``, then ``v1beta1.DRAPlugin``) and, optionally, the health service the way
kubelet v1.37 negotiates it (``v1.DRAResourceHealth`` if the plugin lists it, else
``v1alpha1.DRAResourceHealth``, else none; :mod:`draflow_runtime.drahealth`, shared with
slice-publisher), adds the endpoint to the :class:`PluginStore` and answers
``NotifyRegistrationStatus`` (registered, or not with the reason). A socket that disappears
deregisters its plugin; a socket that is replaced (new inode: the driver restarted) is registered again.

Several endpoints of one driver may be registered at once (rolling update with per-pod socket names):
:meth:`PluginStore.get` returns the newest, so the new driver pod takes over as soon as it registers
and the old one serves again only if the new one goes away first.

The directory is polled (every 0.5 s by default): simple, works on every file system, and one loop
serves every node of a fleet. Errors::

    RegistrationError (DraflowError)     a socket could not be registered; carries driver and socket
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2 as dra_v1beta1
from draflow_protos.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb2
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.drahealth import choose_health_service
from draflow_runtime.errors import DraflowError
from draflow_runtime.log import get_logger

log = get_logger(__name__)

PLUGIN_TYPE = "DRAPlugin"
V1 = "v1.DRAPlugin"
V1BETA1 = "v1beta1.DRAPlugin"
#: What the shim speaks, in order of preference (the kubelet's list).
SUPPORTED_VERSIONS: tuple[str, ...] = (V1, V1BETA1)
REGISTRATION_SUFFIX = "-reg.sock"

_MODULES = {V1: (dra_v1, dra_v1_grpc), V1BETA1: (dra_v1beta1, dra_v1beta1_grpc)}
_sequence = itertools.count(1)


class RegistrationError(DraflowError):
    """A plugin socket could not be registered; the reason was also sent to the plugin."""

    def __init__(self, message: str, *, socket: str, driver: str = "") -> None:
        super().__init__(message)
        self.socket = socket
        self.driver = driver


def choose_version(plugin_versions: Sequence[str]) -> str | None:
    """The first of the plugin's versions that the shim supports (the plugin's order wins), else None."""
    for version in plugin_versions:
        if version in SUPPORTED_VERSIONS:
            return version
    return None


def validate_info(info: Any) -> tuple[str, str]:
    """Check a ``PluginInfo``; return (DRA service, health service or "") or raise ValueError."""
    if info.type != PLUGIN_TYPE:
        raise ValueError(f"plugin type {info.type!r} is not {PLUGIN_TYPE!r}")
    if not info.name:
        raise ValueError("plugin info has an empty name")
    if not info.endpoint:
        raise ValueError("plugin info has an empty endpoint")
    if not info.supported_versions:
        raise ValueError("plugin info lists no supported versions")
    version = choose_version(info.supported_versions)
    if version is None:
        raise ValueError(
            f"none of the plugin's versions {list(info.supported_versions)} is supported "
            f"(supported: {list(SUPPORTED_VERSIONS)})"
        )
    return version, choose_health_service(info.supported_versions)


@dataclass(eq=False)
class Plugin:
    """One registered endpoint of a driver. ``seq`` orders registrations (higher is newer)."""

    driver: str
    endpoint: str
    version: str
    health_service: str  # the negotiated DRAResourceHealth service, "" when the plugin has none
    registration_socket: str
    seq: int = field(default_factory=lambda: next(_sequence))
    registered_at: float = field(default_factory=time.time)
    _channel: grpc.aio.Channel | None = field(default=None, repr=False)

    @property
    def channel(self) -> grpc.aio.Channel:
        """The gRPC channel to the DRA socket, opened on first use (it reconnects by itself)."""
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(f"unix:{self.endpoint}")
        return self._channel

    @property
    def health(self) -> bool:
        return bool(self.health_service)

    @property
    def messages(self) -> Any:
        """The ``api_pb2`` module of the negotiated version (v1 and v1beta1 differ only in share_id)."""
        return _MODULES[self.version][0]

    def stub(self) -> Any:
        return _MODULES[self.version][1].DRAPluginStub(self.channel)

    async def close(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()


class PluginStore:
    """Registered plugins of one node, by driver name. Newest registration wins in :meth:`get`."""

    def __init__(self) -> None:
        self._by_driver: dict[str, list[Plugin]] = {}
        self._listeners: list[Callable[[str, Plugin], None]] = []

    def add_listener(self, listener: Callable[[str, Plugin], None]) -> None:
        """``listener("added"|"removed", plugin)``, called synchronously after each change."""
        self._listeners.append(listener)

    def add(self, plugin: Plugin) -> None:
        """Register ``plugin``. The same endpoint cannot be registered twice (ValueError)."""
        plugins = self._by_driver.setdefault(plugin.driver, [])
        if any(p.endpoint == plugin.endpoint for p in plugins):
            raise ValueError(f"endpoint {plugin.endpoint} of driver {plugin.driver} is already registered")
        plugins.append(plugin)
        for listener in self._listeners:
            listener("added", plugin)

    def remove(self, plugin: Plugin) -> bool:
        plugins = self._by_driver.get(plugin.driver, [])
        if plugin not in plugins:
            return False
        plugins.remove(plugin)
        if not plugins:
            del self._by_driver[plugin.driver]
        for listener in self._listeners:
            listener("removed", plugin)
        return True

    def get(self, driver: str) -> Plugin | None:
        """The newest registered endpoint of ``driver``, or None."""
        plugins = self._by_driver.get(driver)
        return max(plugins, key=lambda p: p.seq) if plugins else None

    def drivers(self) -> list[str]:
        return sorted(self._by_driver)

    def all(self) -> list[Plugin]:
        return [p for plugins in self._by_driver.values() for p in plugins]


@dataclass
class _SocketState:
    identity: tuple[int, int]  # (inode, ctime_ns): a new file at the same path is a new registration
    plugin: Plugin | None = None
    failures: int = 0
    retry_at: float = 0.0


class PluginWatcher:
    """Registers the plugins whose sockets are in one node's registry directory.

    :meth:`sync` compares the directory with what is registered and acts on the difference; it is
    idempotent and meant to be called periodically (by :func:`poll` or by the fleet's shared loop).
    A failed registration is retried with exponential backoff (1 s doubling to 60 s).
    """

    def __init__(
        self, node: str, registry_dir: Path, store: PluginStore, *, rpc_timeout: float = 10.0
    ) -> None:
        self.node = node
        self.registry_dir = registry_dir
        self.store = store
        self.rpc_timeout = rpc_timeout
        self._sockets: dict[str, _SocketState] = {}
        self._found: dict[str, tuple[int, int]] = {}
        self._busy = False

    def _scan(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        try:
            with os.scandir(self.registry_dir) as entries:
                for entry in entries:
                    if not entry.name.endswith(".sock"):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        st = entry.stat(follow_symlinks=False)
                        found[entry.path] = (st.st_ino, st.st_ctime_ns)
        except FileNotFoundError:
            pass
        return found

    def needs_sync(self) -> bool:
        """Scan the directory (cheap, no await); True when :meth:`sync` has something to do."""
        self._found = self._scan()
        if self._found.keys() != self._sockets.keys():
            return True
        now = time.monotonic()
        return any(
            st.identity != self._found[path] or (st.plugin is None and now >= st.retry_at)
            for path, st in self._sockets.items()
        )

    async def sync(self) -> None:
        """Register new or replaced sockets, deregister vanished ones. One sync at a time per node."""
        if self._busy:
            return
        self._busy = True
        try:
            found = self._scan()
            now = time.monotonic()
            for path in list(self._sockets):
                state = self._sockets[path]
                if found.get(path) != state.identity:
                    await self._deregister(path, state)
            for path, identity in found.items():
                if path not in self._sockets:
                    self._sockets[path] = _SocketState(identity)
                state = self._sockets[path]
                if state.plugin is None and now >= state.retry_at:
                    await self._register(path, state)
        finally:
            self._busy = False

    async def _deregister(self, path: str, state: _SocketState) -> None:
        del self._sockets[path]
        if state.plugin is not None:
            self.store.remove(state.plugin)
            log.info("plugin deregistered", node=self.node, driver=state.plugin.driver, socket=path)
            await state.plugin.close()

    async def _register(self, path: str, state: _SocketState) -> None:
        try:
            state.plugin = await self.register_socket(path)
            state.failures = 0
        except RegistrationError as exc:
            state.failures += 1
            delay = min(60.0, 2.0 ** (state.failures - 1))
            state.retry_at = time.monotonic() + delay
            log.warning(
                "plugin registration failed",
                node=self.node,
                socket=path,
                driver=exc.driver,
                error=str(exc),
                retry_in=delay,
            )

    async def register_socket(self, path: str) -> Plugin:
        """GetInfo, validate, add to the store, NotifyRegistrationStatus. Raises RegistrationError."""
        async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
            stub = reg_grpc.RegistrationStub(channel)
            try:
                info = await stub.GetInfo(reg_pb2.InfoRequest(), timeout=self.rpc_timeout)
            except grpc.aio.AioRpcError as exc:
                raise RegistrationError(
                    f"GetInfo failed: {exc.code().name}: {exc.details()}", socket=path
                ) from exc
            plugin: Plugin | None = None
            try:
                version, health = validate_info(info)
                plugin = Plugin(info.name, info.endpoint, version, health, registration_socket=path)
                self.store.add(plugin)
            except ValueError as exc:
                await _notify(stub, False, str(exc), self.rpc_timeout)
                raise RegistrationError(str(exc), socket=path, driver=info.name) from exc
            try:
                await _notify(stub, True, "", self.rpc_timeout)
            except grpc.aio.AioRpcError as exc:
                self.store.remove(plugin)
                await plugin.close()
                raise RegistrationError(
                    f"NotifyRegistrationStatus failed: {exc.code().name}: {exc.details()}",
                    socket=path,
                    driver=info.name,
                ) from exc
        log.info(
            "plugin registered",
            node=self.node,
            driver=plugin.driver,
            endpoint=plugin.endpoint,
            version=plugin.version,
            health=plugin.health_service or "none",
        )
        return plugin

    async def close(self) -> None:
        for path, state in list(self._sockets.items()):
            await self._deregister(path, state)


async def _notify(stub: Any, registered: bool, error: str, rpc_timeout: float) -> None:
    """Tell the plugin the outcome. A failure to deliver a refusal is ignored (we refused anyway)."""
    with contextlib.suppress(grpc.aio.AioRpcError) if not registered else contextlib.nullcontext():
        await stub.NotifyRegistrationStatus(
            reg_pb2.RegistrationStatus(plugin_registered=registered, error=error), timeout=rpc_timeout
        )


async def poll(
    watchers: Callable[[], Sequence[PluginWatcher]], interval: float, concurrency: int = 32
) -> None:
    """Check every watcher's directory every ``interval`` seconds and sync those that changed, at most
    ``concurrency`` at a time, until cancelled. Unchanged directories cost one ``scandir`` each."""
    sem = asyncio.Semaphore(concurrency)
    running: set[PluginWatcher] = set()

    async def one(w: PluginWatcher) -> None:
        try:
            async with sem:
                await w.sync()
        except Exception:
            log.exception("plugin watcher sync failed", node=w.node)
        finally:
            running.discard(w)

    tasks: set[asyncio.Task[None]] = set()
    while True:
        started = time.monotonic()
        for w in watchers():
            if w not in running and w.needs_sync():
                running.add(w)
                task = asyncio.create_task(one(w))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        await asyncio.sleep(max(0.05, interval - (time.monotonic() - started)))
