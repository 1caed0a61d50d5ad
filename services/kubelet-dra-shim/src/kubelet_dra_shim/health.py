"""Device health from the drivers' ``DRAResourceHealth/NodeWatchResources`` streams.

For every registered plugin that advertised a health service, one task keeps the stream open on the
version negotiated at registration (``v1.DRAResourceHealth``, else ``v1alpha1.DRAResourceHealth``: kubelet
v1.37.1's order; the two versions' messages are the same), reconnecting every 5 s while the plugin stays
registered (:func:`draflow_runtime.drahealth.watch_health`, the client slice-publisher uses too). Each
message is the full list of the driver's devices; devices whose status changed are reported through
``on_change(node, driver)`` so the pods using them get their ``allocatedResourcesStatus`` rewritten. A
device not reported for its ``health_check_timeout_seconds`` (default 30 s) is Unknown; when a stream ends
the driver's entries are dropped (Unknown), as in kubelet's ``healthinfo.go``; at most
``MAX_DEVICES_PER_DRIVER`` (kubelet's 16384) devices per driver are kept, further new ones are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from draflow_runtime.drahealth import DeviceReport, watch_health
from draflow_runtime.log import get_logger

from .plugins import Plugin, PluginStore

log = get_logger(__name__)


MAX_DEVICES_PER_DRIVER = 16384  # kubelet v1.37.1's cap (healthinfo.go maxDevicesPerDriver)


@dataclass
class DeviceHealth:
    state: str
    message: str
    seen: float  # monotonic time of the last report
    timeout: float


class NodeHealth:
    """Health of one node's devices, keyed by (driver, pool, device)."""

    def __init__(self, node: str, store: PluginStore, on_change: Callable[[str, str], None]) -> None:
        self.node = node
        self._devices: dict[tuple[str, str, str], DeviceHealth] = {}
        self._tasks: dict[Plugin, asyncio.Task[None]] = {}
        self._on_change = on_change
        store.add_listener(self._plugin_changed)

    def view(self) -> dict[tuple[str, str, str], tuple[str, str]]:
        """(state, message) per device, with timed-out devices reported Unknown."""
        now = time.monotonic()
        return {
            key: (h.state, h.message)
            if now - h.seen <= h.timeout
            else ("Unknown", "no health report in time")
            for key, h in self._devices.items()
        }

    def has_reports(self) -> bool:
        return bool(self._devices)

    def _plugin_changed(self, change: str, plugin: Plugin) -> None:
        if change == "added" and plugin.health:
            self._tasks[plugin] = asyncio.create_task(
                self._watch(plugin), name=f"health-{self.node}-{plugin.driver}"
            )
        elif change == "removed" and plugin in self._tasks:
            self._tasks.pop(plugin).cancel()

    def apply(self, driver: str, devices: list[tuple[str, str, str, str, float]]) -> bool:
        """Record one full list [(pool, device, state, message, timeout)]; True if anything changed."""
        now = time.monotonic()
        changed = False
        reported = set()
        known = sum(1 for k in self._devices if k[0] == driver)
        ignored = 0
        for pool, device, state, message, timeout in devices:
            key = (driver, pool, device)
            old = self._devices.get(key)
            if old is None and known >= MAX_DEVICES_PER_DRIVER:
                ignored += 1
                continue
            known += old is None
            reported.add(key)
            if old is None or (old.state, old.message) != (state, message):
                changed = True
            self._devices[key] = DeviceHealth(state, message, now, timeout)
        for key in [k for k in self._devices if k[0] == driver and k not in reported]:
            del self._devices[key]
            changed = True
        if ignored:
            log.warning("health report over the device cap, new devices ignored", node=self.node,
                        driver=driver, limit=MAX_DEVICES_PER_DRIVER, ignored=ignored)
        return changed

    def clear(self, driver: str) -> bool:
        keys = [k for k in self._devices if k[0] == driver]
        for key in keys:
            del self._devices[key]
        return bool(keys)

    async def _watch(self, plugin: Plugin) -> None:
        def report(devices: list[DeviceReport]) -> None:
            entries = [(d.pool, d.device, d.state, d.message, d.timeout) for d in devices]
            if self.apply(plugin.driver, entries):
                self._on_change(self.node, plugin.driver)

        def lost() -> None:
            if self.clear(plugin.driver):
                self._on_change(self.node, plugin.driver)

        await watch_health(
            plugin.channel, plugin.health_service, report, lost, node=self.node, driver=plugin.driver
        )

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
