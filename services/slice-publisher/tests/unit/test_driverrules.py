"""Driver-gone taint as one DeviceTaintRule: the rule's selection, and the pool decisions around it
(:meth:`DriverBook.desired` with rules on). Pure apart from the event loop's timers."""

from __future__ import annotations

from typing import Any

from draflow_runtime.devicetaints import rule_selects
from slice_publisher.driverbook import DriverBook, PoolKey
from slice_publisher.driverrules import DriverGoneRules, rule_body, rule_name
from slice_publisher.naming import PUBLISHER_NODE_LABEL, node_label_value
from slice_publisher.settings import PublisherSettings
from slice_publisher.splitter import DesiredPool
from slice_publisher.taints import DRIVER_UNAVAILABLE_KEY, EFFECT

DRIVER = "gpu.draflow.example"


def test_the_rule_selects_every_device_of_the_driver_and_nothing_else() -> None:
    rule = rule_body(DRIVER)
    assert rule["metadata"]["name"] == rule_name(DRIVER)
    assert rule["spec"]["taint"] == {"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT}
    for pool, device in [("node-0", "gpu-0"), ("node-999", "gpu-7"), ("shared", "nic-1")]:
        assert rule_selects(rule, DRIVER, pool, device)
    assert not rule_selects(rule, "other.example.com", "node-0", "gpu-0")
    assert rule_name(DRIVER) != rule_name("other.example.com")


class Book:
    """A DriverBook in fleet mode with rules on, recording what it queues."""

    def __init__(self, *, coalesce: float = 60.0, covered: bool = False) -> None:
        self.now: list[PoolKey] = []
        self.later: list[tuple[PoolKey, float]] = []
        self.rule_keys: list[str] = []
        self.covered = covered
        settings = PublisherSettings(fleet_root="/nonexistent", driver_gone_coalesce=coalesce,
                                     driver_gone_grace=3600)
        self.book = DriverBook(settings, self.now.append, lambda node, driver: set())
        self.book.rules_on = lambda: True
        self.book.covered = lambda driver: self.covered
        self.book.driver_changed = self.rule_keys.append
        self.book.enqueue_after = lambda key, seconds: self.later.append((key, seconds))

    def start(self, node: str) -> None:
        pool = DesiredPool(driver=DRIVER, name=node, owner_node=node, placement={"nodeName": node},
                           devices=({"name": "gpu-0"}, {"name": "gpu-1"}))
        self.book.on_inventory(node, DRIVER, [pool])

    def taints(self, node: str) -> list[Any] | None:
        desired, touch = self.book.desired(node, DRIVER, node)
        if not touch:
            return None
        assert desired is not None
        return [t for d in desired.devices for t in d.get("taints") or ()]


async def test_gone_driver_queues_its_rule_key_at_once_and_its_pools_after_the_window() -> None:
    b = Book(coalesce=2.0)
    b.start("node-0")
    b.now.clear()
    b.book.on_unavailable("node-0", DRIVER, "stream broke")
    assert b.rule_keys == [DRIVER]
    assert b.now == [] and b.later == [(("node-0", DRIVER, "node-0"), 2.0)]
    # Within the window the pool is left alone, and looked at again when it is over.
    b.later.clear()
    assert b.taints("node-0") is None
    ((key, wait),) = b.later
    assert key == ("node-0", DRIVER, "node-0") and 0 < wait <= 2.01


async def test_a_pool_covered_by_the_rule_is_not_written_and_an_uncovered_one_is_tainted() -> None:
    b = Book(coalesce=60.0, covered=True)
    b.start("node-0")
    b.book.on_unavailable("node-0", DRIVER, "stream broke")
    assert b.taints("node-0") == []  # the rule taints it: the slices stay as they are

    b = Book(coalesce=0.0, covered=False)
    b.start("node-0")
    b.book.on_unavailable("node-0", DRIVER, "stream broke")
    assert b.taints("node-0") == [{"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT}] * 2


async def test_slice_taints_written_before_the_rule_stay_until_the_driver_is_back() -> None:
    b = Book(coalesce=0.0, covered=False)
    b.start("node-0")
    b.book.on_unavailable("node-0", DRIVER, "stream broke")
    assert b.taints("node-0") == [{"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT}] * 2
    b.covered = True  # the rule came after: removing the slice taint now could open a window
    assert b.taints("node-0") == [{"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT}] * 2
    b.rule_keys.clear()
    b.start("node-0")  # back: untainted, and the rule key is queued (its rule may go)
    assert b.taints("node-0") == []
    assert b.rule_keys == [DRIVER]


async def test_rules_off_taints_the_slices_at_once() -> None:
    b = Book(coalesce=60.0)
    b.book.rules_on = lambda: False
    b.start("node-0")
    b.now.clear()
    b.book.on_unavailable("node-0", DRIVER, "stream broke")
    assert b.now == [("node-0", DRIVER, "node-0")] and b.later == [] and b.rule_keys == []
    assert b.taints("node-0") == [{"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT}] * 2


class FakeKube:
    """The API at the client seam: records rule writes; no foreign slices."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def create(self, res: Any, body: dict, field_manager: str | None = None) -> dict:
        self.calls.append(("create", body["metadata"]["name"]))
        return body

    async def delete(self, res: Any, name: str) -> None:
        self.calls.append(("delete", name))

    async def list(self, res: Any, **kwargs: Any) -> dict:
        return {"items": []}


class Slices:
    def __init__(self, nodes: list[str]) -> None:
        self.items = [{"metadata": {"name": f"{n}-s", "labels": {PUBLISHER_NODE_LABEL: node_label_value(n)}},
                       "spec": {"driver": DRIVER, "pool": {"name": n}}} for n in nodes]

    def list(self) -> list[dict]:
        return self.items


async def test_the_rule_goes_only_once_the_slices_of_wiped_nodes_are_deleted() -> None:
    b = Book(coalesce=60.0)
    b.book.startup_done = True
    slices = Slices(["node-0", "node-1"])
    kube = FakeKube()
    rules = DriverGoneRules(kube, b.book, slices, min_pools=2, field_manager="test")  # type: ignore[arg-type]
    for node in ("node-0", "node-1"):
        b.start(node)
        b.book.on_unavailable(node, DRIVER, "stream broke")
    await rules.reconcile(DRIVER)
    assert kube.calls == [("create", rule_name(DRIVER))] and rules.covers(DRIVER)

    b.book.states.clear()  # both wiped after the grace: their slices' deletes are on the way
    await rules.reconcile(DRIVER)
    assert kube.calls == [("create", rule_name(DRIVER))], "untainted while the slices are still there"
    slices.items.clear()  # deleted (the informer's delete events queue the driver's key)
    await rules.reconcile(DRIVER)
    assert kube.calls[-1] == ("delete", rule_name(DRIVER)) and not rules.covers(DRIVER)


async def test_no_rule_while_a_published_pool_of_the_driver_is_alive() -> None:
    b = Book(coalesce=60.0)
    b.book.startup_done = True
    kube = FakeKube()
    rules = DriverGoneRules(kube, b.book, Slices(["node-0", "node-1"]), min_pools=1,  # type: ignore[arg-type]
                            field_manager="test", sockets=lambda d: {"node-1": ["/s"]},
                            listening=lambda p: True)
    for node in ("node-0", "node-1"):
        b.start(node)
    b.book.on_unavailable("node-0", DRIVER, "stream broke")
    await rules.reconcile(DRIVER)
    assert kube.calls == [] and not rules.covers(DRIVER)
    # node-1's stream has not broken yet, but nobody listens on its socket: gone too.
    rules.listening = lambda p: False
    await rules.reconcile(DRIVER)
    assert kube.calls == [("create", rule_name(DRIVER))]
