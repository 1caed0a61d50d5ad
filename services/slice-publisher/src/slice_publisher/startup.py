"""Start-up clean-up of the slice publisher (see the ``fleet`` module docstring for the rules)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from draflow_runtime.errors import Conflict, NotFound
from draflow_runtime.kube import RESOURCE_SLICES
from draflow_runtime.log import get_logger
from slice_publisher.metrics import SLICES_DELETED
from slice_publisher.naming import MANAGED_BY_LABEL, node_label_value

if TYPE_CHECKING:
    from slice_publisher.fleet import Publisher

log = get_logger(__name__)


async def startup_cleanup(pub: Publisher) -> None:
    """After ``startup_grace``: delete slices of the served nodes whose driver did not register."""
    await pub.watcher.scanned.wait()
    await asyncio.sleep(pub.settings.startup_grace)
    pub.drivers.startup_done = True
    nodes = set(pub.watcher.nodes)
    for node in nodes:
        pub.drivers.node_known(node)
    registered = {(c.node, c.driver) for c in pub.watcher.connections() if c.driver}
    self_publishing = {k for k, s in pub.drivers.states.items() if s.unimplemented}
    # Managed slices: their pools' reconciles delete them (no driver state → desired None).
    for node in nodes:
        for sl in pub.slices.by_index("byPublisherNode", node_label_value(node)):
            if (node, sl["spec"]["driver"]) not in pub.drivers.states:
                pub.queue.add((node, sl["spec"]["driver"], sl["spec"]["pool"]["name"]))
    # Other slices of the node (another driver's, a kubelet's) are not ours: removed only on request
    # (simulated nodes), and then not those of a registered driver that publishes for itself.
    for node in nodes if pub.settings.wipe_foreign_slices else ():
        try:
            await delete_foreign(pub, node, registered, self_publishing)
        except Exception as exc:
            log.warning("start-up clean-up failed", node=node, error=repr(exc))
    log.info("start-up clean-up done", nodes=len(nodes), drivers=len(registered))
    pub.startup_cleaned.set()


async def wipe_self_published(pub: Publisher, node: str, driver: str) -> None:
    """Delete the slices of ``node`` that ``driver`` published for itself (it left; see
    ``DriverBook.on_unavailable``); retried with backoff (1 s doubling) until done or cancelled."""
    delay = 1.0
    while True:
        try:
            await delete_foreign(pub, node, set(), set(), driver=driver)
            return
        except Exception as exc:
            log.warning("removing a departed driver's slices failed, retrying", node=node, driver=driver,
                        error=repr(exc), retry_in=delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 60.0)


async def delete_foreign(
    pub: Publisher, node: str, registered: set[tuple[str, str]], self_publishing: set[tuple[str, str]],
    *, driver: str | None = None,
) -> None:
    """Delete ``node``'s slices slice-publisher did not write (only ``driver``'s when given), except those
    of ``self_publishing`` drivers; with preconditions (a slice rewritten meanwhile is kept)."""
    lst = await pub.kube.list(
        RESOURCE_SLICES, field_selector=f"spec.nodeName={node}", label_selector=f"!{MANAGED_BY_LABEL}"
    )
    for sl in lst.get("items") or ():
        of = sl["spec"]["driver"]
        if (driver is not None and of != driver) or (node, of) in self_publishing:
            continue
        meta = sl["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            await pub.kube.delete(
                RESOURCE_SLICES,
                meta["name"],
                preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
            )
            pub.stats.deleted += 1
            SLICES_DELETED.labels(of).inc()
            log.info(
                "removed slice of a driver we do not serve",
                node=node,
                driver=of,
                slice=meta["name"],
                registered=(node, of) in registered,
            )
