"""Plugin registration, the kubelet's way: the runtime's registry watcher + what the shim does per socket.

:func:`registration_watcher` watches every served node's registry directory with
:class:`draflow_runtime.pluginwatcher.PluginWatcher` (kubelet v1.37.1's rules: any unix socket under the
directory that is not a dot-file; identity = socket path; a socket created again is a new registration),
one loop and one work queue (key ``(node, socket path)``) for the whole fleet. :class:`Registrar`
reconciles one socket:

- gone: the plugin is removed from the node's :class:`~kubelet_dra_shim.plugins.PluginStore` and its
  channel closed (``Done``);
- new or created again: the old registration is removed first; then ``GetInfo``,
  :func:`~kubelet_dra_shim.plugins.validate_info`, add to the store, ``NotifyRegistrationStatus(true)``
  (``Done``); a plugin that is refused is told why (``NotifyRegistrationStatus(false, reason)``);
- failed (GetInfo, refused, Notify): ``RequeueWithBackoff`` — the watcher's queue retries 1 s doubling to
  60 s, until the socket changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from draflow_runtime.log import get_logger
from draflow_runtime.pluginwatcher import PluginWatcher, Stamp, get_info, notify_registration
from draflow_runtime.reconcile import Done, ReconcileResult, RequeueWithBackoff

from .plugins import Plugin, PluginStore, RegistrationError, validate_info

log = get_logger(__name__)

#: Retries of a failed registration: 1 s doubling to 60 s.
RETRY_BASE = 1.0
RETRY_MAX = 60.0


@dataclass
class _Registered:
    stamp: Stamp
    plugin: Plugin


class Registrar:
    """Registers the plugins of the nodes in ``stores`` (node → its plugin store); a
    :class:`~draflow_runtime.pluginwatcher.SocketHandler`."""

    def __init__(self, stores: Mapping[str, PluginStore], *, rpc_timeout: float = 10.0) -> None:
        self.stores = stores
        self.rpc_timeout = rpc_timeout
        self._registered: dict[tuple[str, str], _Registered] = {}

    async def sync_socket(self, node: str, path: str, stamp: Stamp | None) -> ReconcileResult:
        key = (node, path)
        current = self._registered.get(key)
        if current is not None and current.stamp == stamp:
            return Done()
        if current is not None:
            await self._deregister(node, path)
        if stamp is None:
            return Done()
        store = self.stores.get(node)
        if store is None:
            return Done()  # not a node this shim serves
        try:
            plugin = await self.register_socket(node, path, store)
        except RegistrationError as exc:
            log.warning(
                "plugin registration failed", node=node, socket=path, driver=exc.driver, error=str(exc)
            )
            return RequeueWithBackoff(base_delay=RETRY_BASE, max_delay=RETRY_MAX)
        self._registered[key] = _Registered(stamp, plugin)
        return Done()

    async def _deregister(self, node: str, path: str) -> None:
        current = self._registered.pop((node, path), None)
        if current is None:
            return
        self.stores[node].remove(current.plugin)
        log.info("plugin deregistered", node=node, driver=current.plugin.driver, socket=path)
        await current.plugin.close()

    async def register_socket(self, node: str, path: str, store: PluginStore) -> Plugin:
        """GetInfo, validate, add to the store, NotifyRegistrationStatus. Raises RegistrationError."""
        timeout = self.rpc_timeout
        try:
            info = await get_info(path, timeout)
        except grpc.aio.AioRpcError as exc:
            raise RegistrationError(
                f"GetInfo failed: {exc.code().name}: {exc.details()}", socket=path
            ) from exc
        try:
            version, health = validate_info(info)
            plugin = Plugin(info.name, info.endpoint, version, health, registration_socket=path)
            store.add(plugin)
        except ValueError as exc:
            # A failure to deliver a refusal is ignored (we refused anyway).
            with contextlib.suppress(grpc.aio.AioRpcError):
                await notify_registration(path, False, str(exc), timeout)
            raise RegistrationError(str(exc), socket=path, driver=info.name) from exc
        try:
            await notify_registration(path, True, "", timeout)
        except grpc.aio.AioRpcError as exc:
            store.remove(plugin)
            await plugin.close()
            raise RegistrationError(
                f"NotifyRegistrationStatus failed: {exc.code().name}: {exc.details()}",
                socket=path,
                driver=info.name,
            ) from exc
        log.info(
            "plugin registered",
            node=node,
            driver=plugin.driver,
            endpoint=plugin.endpoint,
            version=plugin.version,
            health=plugin.health_service or "none",
        )
        return plugin

    async def close(self) -> None:
        for node, path in list(self._registered):
            await self._deregister(node, path)


def registration_watcher(
    nodes: Mapping[str, tuple[Path, PluginStore]],
    *,
    interval: float = 0.5,
    rpc_timeout: float = 10.0,
    workers: int = 32,
) -> PluginWatcher:
    """One watcher for every node in ``nodes`` (node → (registry directory, plugin store))."""
    dirs = {node: directory for node, (directory, _) in nodes.items()}
    registrar = Registrar({node: store for node, (_, store) in nodes.items()}, rpc_timeout=rpc_timeout)
    return PluginWatcher(
        lambda: dirs,
        registrar,
        interval=interval,
        name="plugin-registration",
        workers=workers,
        retry_base=RETRY_BASE,
        retry_max=RETRY_MAX,
    )
