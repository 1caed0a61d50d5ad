"""Driver-gone taint as one DeviceTaintRule per driver, instead of one slice write per pool (fleet mode).

When a fleet-mode driver process dies, every node it served loses its driver at once: tainting each pool's
slices is one write per pool (1,000 nodes: 1,000 slice updates, API-server bound). A DeviceTaintRule
(``resource.k8s.io/v1``, DRADeviceTaintRules, GA in 1.37) whose selector names only the driver puts the
same taint (``draflow.dev/driver-unavailable``, ``NoSchedule``) on every device of that driver, in one
write. kube-scheduler and structured-allocator patch a rule's taint into the devices it selects before
allocating, so for them the rule and the slice taint are the same thing.

A driver-wide rule is only equivalent when *every* published pool of the driver is gone. The rule is
created when all of these hold (:meth:`DriverGoneRules.reconcile`, key = the driver name):

- at least ``driver_gone_rule_min_pools`` (node, driver) of this publisher are unavailable (below that,
  per-pool slice taints are few writes and exact);
- every slice of the driver in the informer (the managed slices of all publishers) belongs to a
  (node, driver) of this publisher that is unavailable, or whose registration sockets no longer accept
  connections (a fleet driver's streams break one after the other over seconds when its process dies;
  one ``connect`` per socket finds them all gone at the first break);
- no slice of the driver is published by anyone else (one ``LIST`` with ``limit=1``).

Once created, the rule stays while any (node, driver) of the driver is unavailable (a returning node stays
tainted until the last one returns or is wiped after ``driver_gone_grace``: too broad, never too narrow)
or a slice of the driver is still published for a node of ours without the driver (wiped, or not back
after a publisher restart: the rule goes only once those deletes are through, so no device is untainted
meanwhile), and is deleted when neither holds. A slice of the driver published by someone else after the
check is tainted too until then: the same bound. Pools whose slices were tainted before the rule existed
keep that taint until their driver returns (removing it while the allocator may not have seen the rule yet
would open a window). Unavailable pools wait ``driver_gone_coalesce`` seconds before their slices are
tainted, so the rule can be created first (:meth:`slice_publisher.driverbook.DriverBook.desired`).

Rules are named ``draflow-driver-unavailable-<10 hex of sha256(driver)>`` and labelled as the publisher's;
a rule left behind by a crashed publisher is reconciled after the start-up clean-up. Turned off when the
API server does not serve DeviceTaintRules, and for the rest of the run after a ``Forbidden`` create
(the identity lacks the RBAC: back to slice taints, one warning).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Hashable, Mapping
from typing import Any, cast

from draflow_runtime.errors import AlreadyExists, ApiError, Forbidden, NotFound, TransportError
from draflow_runtime.informer import Informer
from draflow_runtime.kube import DEVICE_TAINT_RULES, RESOURCE_SLICES, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.reconcile import Done
from slice_publisher.driverbook import DriverBook
from slice_publisher.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE, PUBLISHER_NODE_LABEL
from slice_publisher.taints import DRIVER_UNAVAILABLE_KEY, EFFECT

log = get_logger(__name__)

DRIVER_LABEL = "draflow.dev/driver-hash"
OWN_RULES = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"


def rule_name(driver: str) -> str:
    """The driver's rule: deterministic, so a create racing a stale cache fails with AlreadyExists."""
    return f"draflow-driver-unavailable-{driver_hash(driver)}"


def driver_hash(driver: str) -> str:
    return hashlib.sha256(driver.encode()).hexdigest()[:10]


def rule_body(driver: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": rule_name(driver),
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, DRIVER_LABEL: driver_hash(driver)},
            "annotations": {"draflow.dev/driver": driver},
        },
        "spec": {
            "deviceSelector": {"driver": driver},
            "taint": {"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT},
        },
    }


class DriverGoneRules:
    """The driver-wide DeviceTaintRules of one publisher: informer, reconcile, and :meth:`covers`."""

    def __init__(
        self,
        kube: KubeClient,
        book: DriverBook,
        slices: Informer,
        *,
        min_pools: int,
        field_manager: str,
        sockets: Callable[[str], Mapping[str, list[str]]] = lambda driver: {},
        listening: Callable[[str], bool] = lambda path: True,
    ) -> None:
        """``sockets(driver)``: node -> the registration sockets of ``driver`` there; ``listening(path)``:
        does a process accept connections on that socket."""
        self.kube = kube
        self.book = book
        self.slices = slices
        self.min_pools = min_pools
        self.field_manager = field_manager
        self.enabled = min_pools > 0
        self.sockets = sockets
        self.listening = listening
        self._present: set[str] = set()  # drivers whose rule exists (created, or adopted at start-up)
        self.created = 0
        self.deleted = 0

    def disable(self, reason: str) -> None:
        if self.enabled:
            log.warning("driver-gone taint rules off, tainting slices instead", reason=reason)
        self.enabled = False

    def covers(self, driver: str) -> bool:
        """Does a rule of this publisher taint every device of ``driver`` (created or adopted, not
        deleted since)? This process is the only writer of its rules, so it need not watch them."""
        return self.enabled and driver in self._present

    async def adopt(self) -> set[str]:
        """The drivers of the rules a previous run left (one LIST, after the start-up clean-up); they
        count as present until their reconcile decides."""
        if not self.enabled:
            return set()
        delay = 0.5
        while True:  # a leftover rule nobody adopts would taint its driver for good: retry
            try:
                found = await self.kube.list(DEVICE_TAINT_RULES, label_selector=OWN_RULES)
                break
            except Forbidden as exc:
                self.disable(f"listing DeviceTaintRules is forbidden: {exc}")
                return set()
            except (ApiError, TransportError) as exc:
                log.warning("listing leftover driver-gone DeviceTaintRules failed, retrying", error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        drivers = {r["metadata"].get("annotations", {}).get("draflow.dev/driver", "") for r in found["items"]}
        drivers.discard("")
        self._present |= drivers
        return drivers

    async def reconcile(self, key: Hashable) -> Done:
        driver = cast(str, key)
        if not self.enabled or not self.book.startup_done:
            return Done()
        unavailable = [n for (n, d), s in self.book.states.items() if d == driver and s.unavailable]
        present = self.covers(driver)
        if present:
            if not unavailable and not self._slices_without_driver(driver):
                await self._delete(driver)
            return Done()
        if not unavailable or not await self._all_gone(driver):
            return Done()
        try:
            await self.kube.create(DEVICE_TAINT_RULES, rule_body(driver), field_manager=self.field_manager)
        except AlreadyExists:
            pass  # ours from before (a stale cache): it covers the driver
        except Forbidden as exc:
            self.disable(f"creating a DeviceTaintRule is forbidden: {exc}")
            self.book.enqueue_unavailable(driver)
            return Done()
        else:
            self.created += 1
        self._present.add(driver)
        log.info("driver gone from every pool, tainted all its devices with one DeviceTaintRule",
                 driver=driver, nodes=len(unavailable), rule=rule_name(driver))
        return Done()

    def _slices_without_driver(self, driver: str) -> bool:
        """Are slices of ``driver`` still published for one of our nodes whose driver is not back (wiped
        or not registered since a restart: their deletes may still be on the way)? The rule stays until
        they are gone (a slice delete queues the driver's key again)."""
        for sl in self.slices.list():
            if sl["spec"].get("driver") != driver:
                continue
            node = self.book.node_by_label.get(sl["metadata"].get("labels", {}).get(PUBLISHER_NODE_LABEL, ""))
            if node is None:
                continue  # another publisher's: alive as far as we know
            state = self.book.states.get((node, driver))
            if state is None or state.unavailable:
                return True
        return False

    async def _all_gone(self, driver: str) -> bool:
        """Every published slice of ``driver`` belongs to a (node, driver) of ours whose driver is gone
        (unavailable, or not listening any more), and at least ``min_pools`` nodes are concerned."""
        sockets = self.sockets(driver)
        gone: dict[str, bool] = {}
        for sl in self.slices.list():
            if sl["spec"].get("driver") != driver:
                continue
            node = self.book.node_by_label.get(sl["metadata"].get("labels", {}).get(PUBLISHER_NODE_LABEL, ""))
            if node is None:
                return False  # another publisher's
            if node not in gone:
                state = self.book.states.get((node, driver))
                gone[node] = state is not None and (state.unavailable or not any(
                    self.listening(path) for path in sockets.get(node, ())))
            if not gone[node]:
                return False
        if len(gone) < self.min_pools:
            return False
        others = await self.kube.list(
            RESOURCE_SLICES, field_selector=f"spec.driver={driver}",
            label_selector=f"{MANAGED_BY_LABEL}!={MANAGED_BY_VALUE}", limit=1,
        )
        return not others.get("items")

    async def _delete(self, driver: str) -> None:
        try:
            await self.kube.delete(DEVICE_TAINT_RULES, rule_name(driver))
        except NotFound:
            pass
        else:
            self.deleted += 1
        self._present.discard(driver)
        log.info("driver back, removed its DeviceTaintRule", driver=driver, rule=rule_name(driver))
