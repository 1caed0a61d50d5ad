"""Selectors the apiserver accepts but that are expensive to evaluate, against a real kube-apiserver:
a regex that backtracking engines choke on is evaluated in linear time, and a selector that runs out
of the evaluation budget is its DeviceClass's broken input (condition + Event naming class and
expression, once), while other pods keep being scheduled."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY
from sa_kit import Kit, eventually

from structured_allocator.core.cel_cost import COST_EXCEEDED

pytestmark = pytest.mark.integration

L25 = "[" + ", ".join(str(i) for i in range(25)) + "]"
THREE_DEEP = f"{L25}.all(a, {L25}.all(b, {L25}.all(c, a + b + c >= 0)))"
REDOS = '"aaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""'


async def _events(kit: Kit, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kit.events(pod) if e.get("reason") == reason]


async def test_pathological_selectors_do_not_hold_up_the_allocator(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 4)
    await kit.device_class_()
    deep = await kit.device_class_(f"deep-{kit.suffix}", THREE_DEEP)  # the apiserver accepts it
    redos = await kit.device_class_(f"redos-{kit.suffix}", REDOS)
    await kit.template("good")
    await kit.template("deep", device_class=deep)
    await kit.template("redos", device_class=redos)
    sched = await kit.start()

    await kit.template_pod("deep", "deep")
    await kit.template_pod("redos", "redos")
    await kit.template_pod("good", "good")
    assert await kit.wait_bound("good") == node
    assert await kit.wait_bound("redos") == node  # RE2: no 71 s of backtracking first

    message = await kit.wait_condition("deep", deep)
    assert THREE_DEEP in message
    assert COST_EXCEEDED in message
    events = await eventually(lambda: _events(kit, "deep", "FailedScheduling"), what="event")
    assert deep in events[0]["message"] and THREE_DEEP in events[0]["message"]

    # Broken input is not retried on a timer (unschedulable_retry), nor with error backoff...
    key = f"{kit.namespace}/deep"
    assert key in sched.unschedulable
    assert sched.queue.waiting_until(key) is None
    assert sched.queue.num_requeues(key) == 0
    # ...but when something changes: a new node and slice requeue it; the memoised error gives the
    # same message, so no second Event; and other pods keep being scheduled meanwhile.
    tried = _unschedulable_decisions()
    other = await kit.node("m")
    await kit.slice(other, 2)
    await kit.template_pod("good2", "good")
    await kit.wait_bound("good2")
    await eventually(lambda: _unschedulable_decisions() > tried, what="the broken pod tried again")
    assert len(await _events(kit, "deep", "FailedScheduling")) == 1
    assert sched.queue.waiting_until(key) is None


def _unschedulable_decisions() -> float:
    """Decisions with outcome Unschedulable so far (only the broken pod has that outcome here)."""
    return REGISTRY.get_sample_value("draflow_allocator_decision_seconds_count",
                                     {"outcome": "unschedulable"}) or 0.0
