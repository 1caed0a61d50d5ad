"""Bus logic that needs no server: the bounded FIFO outbox and the disabled bus."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from draflow_runtime.bus import MSG_ID_HEADER, BusUnavailable, EventBus, Outbox
from draflow_runtime.outbox import OutboxDelivery, OutboxMessage


def metric(metric_name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric_name, labels) or 0.0


def test_outbox_is_fifo() -> None:
    box: Outbox[int] = Outbox(3)
    for i in range(3):
        assert box.push(i) is None
    assert list(box) == [0, 1, 2]
    assert box.peek() == 0
    assert box.pop_if(0)
    assert list(box) == [1, 2]


def test_full_outbox_evicts_the_oldest() -> None:
    box: Outbox[int] = Outbox(2)
    box.push(1)
    box.push(2)
    assert box.push(3) == 1
    assert box.push(4) == 2
    assert list(box) == [3, 4]
    assert len(box) == 2


def test_pop_if_leaves_a_newer_head_alone() -> None:
    box: Outbox[str] = Outbox(1)
    box.push("a")
    head = box.peek()
    box.push("b")  # evicts "a" while it was being delivered
    assert head == "a"
    assert not box.pop_if("a")
    assert list(box) == ["b"]


def test_outbox_needs_room_for_one() -> None:
    with pytest.raises(ValueError):
        Outbox(0)


async def test_publish_while_never_connected_is_outboxed_and_bounded() -> None:
    bus = EventBus("nats://127.0.0.1:1", name="unit-bounded", outbox_size=3)  # never started
    for i in range(5):
        assert await bus.publish("draflow.test", str(i).encode(), msg_id=f"id-{i}") is True  # queued
    kept = list(bus._outbox)
    assert [m.data for m in kept] == [b"2", b"3", b"4"]
    assert [m.headers[MSG_ID_HEADER] for m in kept] == ["id-2", "id-3", "id-4"]
    assert metric("draflow_bus_outboxed_total", name="unit-bounded") == 5
    assert metric("draflow_bus_dropped_total", name="unit-bounded", reason="outbox_full") == 2
    assert metric("draflow_bus_outbox_depth", name="unit-bounded") == 3


async def test_every_jetstream_message_gets_a_dedup_id() -> None:
    bus = EventBus("nats://127.0.0.1:1", name="unit-ids")
    await bus.publish("a", b"1")
    await bus.publish("a", b"2")
    await bus.publish("a", b"3", jetstream=False)
    first, second, core = list(bus._outbox)
    assert first.headers[MSG_ID_HEADER] != second.headers[MSG_ID_HEADER]
    assert MSG_ID_HEADER not in core.headers


async def test_disabled_bus_discards_and_refuses_requests() -> None:
    bus = EventBus("", name="unit-disabled")
    await bus.start()
    assert await bus.publish("a", b"x") is False
    assert bus.outbox_size == 0
    with pytest.raises(BusUnavailable):
        await bus.request("a", b"x", timeout=0.1)
    await bus.stop()


def test_outbox_discard_removes_that_very_item_wherever_it_is() -> None:
    box: Outbox[list[str]] = Outbox(4)
    a, b, c = ["a"], ["b"], ["c"]
    for item in (a, b, c):
        box.push(item)
    assert box.head(2) == [a, b]
    assert not box.discard(["b"]), "an equal item is not the item"
    assert box.discard(b)
    assert list(box) == [a, c]




async def _waiting_at_first_send(linger: float) -> list[str]:
    """Publish "a", then "b" 20 ms later; return what the outbox held when "a" was sent."""
    seen: list[str] = []
    ready = asyncio.Event()
    ready.set()

    async def send(msg: OutboxMessage) -> None:
        if msg.subject == "a":
            seen.extend(m.subject for m in delivery.outbox)

    delivery = OutboxDelivery("linger-test", 10, send, ready, max_in_flight=10, max_backoff=0.1,
                              linger=linger)
    task = asyncio.create_task(delivery.run_forever())
    try:
        delivery.keep(OutboxMessage("a", b""))
        await asyncio.sleep(0.02)
        delivery.keep(OutboxMessage("b", b""))
        assert await delivery.wait_empty(5.0)
    finally:
        task.cancel()
    return seen


async def test_a_lingering_outbox_sends_what_was_published_meanwhile_in_one_batch() -> None:
    assert await _waiting_at_first_send(linger=1.0) == ["a", "b"]  # one batch
    assert await _waiting_at_first_send(linger=0.0) == ["a"]  # at once, alone
