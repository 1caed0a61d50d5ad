"""Registered DRA plugins: what a ``PluginInfo`` must say to be accepted, and the store per node.

:func:`validate_info` accepts a ``DRAPlugin`` (:func:`draflow_runtime.pluginwatcher.check_dra_plugin`)
and picks the first entry of the plugin's ``supported_versions`` that the shim speaks (``v1.DRAPlugin``,
then ``v1beta1.DRAPlugin``) and the health service the way kubelet v1.37 negotiates it
(``v1.DRAResourceHealth`` if the plugin lists it, else ``v1alpha1.DRAResourceHealth``, else none;
:mod:`draflow_runtime.drahealth`, shared with slice-publisher). :mod:`kubelet_dra_shim.registration`
does the registering.

Several endpoints of one driver may be registered at once (rolling update with per-pod socket names):
:meth:`PluginStore.get` returns the newest, so the new driver pod takes over as soon as it registers
and the old one serves again only if the new one goes away first. Errors::

    RegistrationError (DraflowError)     a socket could not be registered; carries driver and socket
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2 as dra_v1beta1
from draflow_protos.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from draflow_runtime.drahealth import choose_health_service
from draflow_runtime.errors import DraflowError
from draflow_runtime.pluginwatcher import PluginInfo, check_dra_plugin

V1 = "v1.DRAPlugin"
V1BETA1 = "v1beta1.DRAPlugin"
#: What the shim speaks, in order of preference (the kubelet's list).
SUPPORTED_VERSIONS: tuple[str, ...] = (V1, V1BETA1)

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


def validate_info(info: PluginInfo) -> tuple[str, str]:
    """Check a ``PluginInfo``; return (DRA service, health service or "") or raise ValueError."""
    check_dra_plugin(info)
    if not info.versions:
        raise ValueError("plugin info lists no supported versions")
    version = choose_version(info.versions)
    if version is None:
        raise ValueError(
            f"none of the plugin's versions {list(info.versions)} is supported "
            f"(supported: {list(SUPPORTED_VERSIONS)})"
        )
    return version, choose_health_service(info.versions)


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
