"""What the publisher knows about each driver: its last inventory, availability, health, pending wipe.

:class:`DriverBook` is the registry watcher's listener (:class:`slice_publisher.drivers.DriverListener`):
its callbacks only record state per (node, driver) and enqueue the pools concerned; the pool reconcile
(:mod:`slice_publisher.fleet`) reads it back through :meth:`DriverBook.desired`.

Driver life cycle per (node, driver):

- inventory message → state replaced, every pool of the driver synced, a pending wipe cancelled, the
  ``driver-unavailable`` taint removed (the slices are updated in place: same names, same UIDs);
- stream broken / registration socket gone → devices tainted at once, a wipe scheduled after
  ``driver_gone_grace``; the wipe forgets the state, so the pools' reconciles delete their slices;
- UNIMPLEMENTED → state marked, nothing published, nothing deleted ("left alone") while it is registered;
  its last registration socket gone → the node's slices of the driver (its own, published by itself) are
  deleted after ``driver_gone_grace`` unless it registers again, as kubelet v1.37.1 wipes them.

Until the start-up clean-up has run (``startup_done``) a pool without driver state is not touched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from draflow_runtime.log import get_logger
from slice_publisher.naming import node_label_value
from slice_publisher.settings import PublisherSettings
from slice_publisher.splitter import DesiredPool
from slice_publisher.taints import Overlay, apply_overlay

log = get_logger(__name__)

PoolKey = tuple[str, str, str]  # (node, driver, pool)


@dataclass
class DriverState:
    """What the publisher knows about one driver on one node."""

    pools: dict[str, DesiredPool] = field(default_factory=dict)
    unavailable: bool = False
    unavailable_at: float | None = None
    unhealthy: frozenset[tuple[str, str]] = frozenset()
    unimplemented: bool = False
    wipe: asyncio.TimerHandle | None = None
    taint_in_slices: bool = False  # the unavailable taint went to its slices (not covered by a rule)


class DriverBook:
    """Driver state per (node, driver); ``enqueue(pool key)`` queues a pool, ``published_pools(node,
    driver)`` names the pools that have slices in the informer cache."""

    def __init__(
        self,
        settings: PublisherSettings,
        enqueue: Callable[[PoolKey], None],
        published_pools: Callable[[str, str], set[str]],
    ) -> None:
        self._settings = settings
        self._enqueue = enqueue
        self._published_pools = published_pools
        self.states: dict[tuple[str, str], DriverState] = {}
        self.node_by_label: dict[str, str] = {}
        self.wiped: set[tuple[str, str]] = set()  # drivers whose slices go even before start-up is done
        self.startup_done = False
        self.partition_type_dropped = False  # the API server drops it: DRAPartitionableDevicesType off
        # Driver-wide DeviceTaintRules (slice_publisher.driverrules), wired by the publisher in fleet mode:
        # whether they may be used, whether one covers a driver, and the rule key's queue.
        self.rules_on: Callable[[], bool] = lambda: False
        self.covered: Callable[[str], bool] = lambda driver: False
        self.driver_changed: Callable[[str], None] = lambda driver: None
        self.enqueue_after: Callable[[PoolKey, float], None] = lambda key, seconds: enqueue(key)
        # Deletes the node's slices of a self-publishing driver that left (wired by the publisher).
        self.wipe_foreign: Callable[[str, str], None] = lambda node, driver: None

    def node_known(self, node: str) -> None:
        self.node_by_label.setdefault(node_label_value(node), node)

    def enqueue_driver(self, node: str, driver: str, extra: set[str] | None = None) -> None:
        """Enqueue every pool of (node, driver): the desired ones and those with slices in the cache."""
        state = self.states.get((node, driver))
        names = set(state.pools) if state else set()
        names |= extra or set()
        names |= self._published_pools(node, driver)
        for pool in names:
            self._enqueue((node, driver, pool))

    def on_inventory(self, node: str, driver: str, pools: list[DesiredPool]) -> None:
        self.node_known(node)
        self.wiped.discard((node, driver))
        state = self.states.setdefault((node, driver), DriverState())
        old = set(state.pools)
        if state.wipe:
            state.wipe.cancel()
            state.wipe = None
        was_unavailable = state.unavailable
        if was_unavailable:
            log.info(
                "driver back",
                node=node,
                driver=driver,
                after=round(time.monotonic() - (state.unavailable_at or 0), 3),
            )
        state.unavailable, state.unavailable_at, state.unimplemented = False, None, False
        state.taint_in_slices = False
        state.pools = {p.name: p for p in pools}
        self.enqueue_driver(node, driver, old)
        if was_unavailable:
            self.driver_changed(driver)

    def on_unavailable(self, node: str, driver: str, reason: str) -> None:
        state = self.states.get((node, driver))
        if state is not None and state.unimplemented:
            self._schedule_foreign_wipe(node, driver, state, reason)
            return
        if state is None or state.unavailable:
            return
        state.unavailable, state.unavailable_at = True, time.monotonic()
        if self._settings.taint_unavailable:
            if self.rules_on():
                # First the driver's rule key; the pools after the coalescing window, so that a driver
                # gone from every node is one rule write, not one slice write per pool.
                self.driver_changed(driver)
                for pool in self._pools_of(node, driver):
                    self.enqueue_after((node, driver, pool), self._settings.driver_gone_coalesce)
            else:
                self.enqueue_driver(node, driver)
        loop = asyncio.get_running_loop()
        state.wipe = loop.call_later(self._settings.driver_gone_grace, self._wipe, node, driver)
        log.info(
            "driver slices will be removed unless it returns",
            node=node,
            driver=driver,
            reason=reason,
            grace=self._settings.driver_gone_grace,
        )

    def _wipe(self, node: str, driver: str) -> None:
        state = self.states.get((node, driver))
        if state is None or not state.unavailable:
            return
        del self.states[(node, driver)]
        self.wiped.add((node, driver))
        log.info("driver did not return, removing its slices", node=node, driver=driver)
        self.enqueue_driver(node, driver, set(state.pools))
        self.driver_changed(driver)

    def _schedule_foreign_wipe(self, node: str, driver: str, state: DriverState, reason: str) -> None:
        """A self-publishing driver left: its slices go after the grace unless it registers again
        (:meth:`on_unimplemented` cancels)."""
        if state.wipe:
            return
        grace = self._settings.driver_gone_grace
        state.wipe = asyncio.get_running_loop().call_later(grace, self._wipe_self_published, node, driver)
        log.info("self-publishing driver left, its slices will be removed unless it returns",
                 node=node, driver=driver, reason=reason, grace=self._settings.driver_gone_grace)

    def _wipe_self_published(self, node: str, driver: str) -> None:
        state = self.states.get((node, driver))
        if state is None or not state.unimplemented or state.wipe is None:
            return
        del self.states[(node, driver)]
        log.info("self-publishing driver did not return, removing its slices", node=node, driver=driver)
        self.wipe_foreign(node, driver)

    def _pools_of(self, node: str, driver: str) -> set[str]:
        state = self.states.get((node, driver))
        return (set(state.pools) if state else set()) | self._published_pools(node, driver)

    def enqueue_unavailable(self, driver: str) -> None:
        """Enqueue the pools of every unavailable (node, ``driver``): their taints go to the slices."""
        for (node, d), state in list(self.states.items()):
            if d == driver and state.unavailable:
                self.enqueue_driver(node, driver)

    def on_unimplemented(self, node: str, driver: str) -> None:
        self.node_known(node)
        state = self.states.setdefault((node, driver), DriverState())
        state.unimplemented = True
        if state.wipe:
            state.wipe.cancel()
            state.wipe = None

    def on_health(self, node: str, driver: str, unhealthy: frozenset[tuple[str, str]]) -> None:
        state = self.states.get((node, driver))
        if state is None or state.unhealthy == unhealthy:
            return
        changed = {p for p, _ in state.unhealthy ^ unhealthy}
        state.unhealthy = unhealthy
        for pool in changed:
            self._enqueue((node, driver, pool))

    def desired(self, node: str, driver: str, pool: str) -> tuple[DesiredPool | None, bool]:
        """(desired pool with the publisher's taints, whether to touch the pool at all)."""
        state = self.states.get((node, driver))
        if state is None:
            return None, self.startup_done or (node, driver) in self.wiped
        if state.unimplemented:
            return None, False
        want = state.pools.get(pool)
        if want is None:
            return None, True
        unavailable = state.unavailable and self._settings.taint_unavailable
        if unavailable and not state.taint_in_slices:
            if self.covered(driver):
                unavailable = False  # the driver's DeviceTaintRule taints these devices
            elif self.rules_on() and (wait := self._settings.driver_gone_coalesce
                                       - (time.monotonic() - (state.unavailable_at or 0))) > 0:
                # The driver's rule may come first: look again once the window is over.
                self.enqueue_after((node, driver, pool), wait + 0.01)
                return None, False
            else:
                state.taint_in_slices = True
        overlay = Overlay(
            driver_unavailable=unavailable,
            unhealthy=frozenset(d for d in state.unhealthy if d[0] == pool)
            if self._settings.taint_unhealthy
            else frozenset(),
        )
        if self.partition_type_dropped and want.partition_type_attribute:
            want = replace(want, partition_type_attribute="")
        return apply_overlay(want, overlay), True

    def cancel_wipes(self) -> None:
        for state in self.states.values():
            if state.wipe:
                state.wipe.cancel()
