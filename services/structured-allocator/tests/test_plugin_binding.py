"""kube-scheduler v1.37.1 DynamicResources ``TestPlugin`` cases about claims that are allocated already and
carry binding conditions (DRADeviceBindingConditions), restated on one decision: a claim whose conditions
all hold is reserved as any other; one whose failure condition holds, or that waited longer than the
binding timeout (conditions missing or others than asked for), is unavailable and PostFilter gives it
back; with two claims only the failed one is given back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sa_builders import DRIVER, alloc, claim, dev, req, res
from test_decision_budget import decider
from test_plugin_decisions import PIN, PluginState, add, pod

from structured_allocator.decision import Placement, Unschedulable

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def bound(name: str, device: str, conditions: dict[str, str] | None, *, minutes_ago: int = 0,
          binding: bool = True) -> dict[str, Any]:
    extra = {"bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]} if binding else {}
    stamp = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    c = claim(name, req("gpu"), allocation=alloc(res("gpu", device, pool="n1", **extra), node_selector=PIN,
                                                 allocationTimestamp=stamp))
    if conditions is not None:
        c["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": device, "conditions": [
            {"type": t, "status": s} for t, s in conditions.items()]}]
    return c


SUCCEEDED = {"condition": "True", "failed": "False"}
FAILED = {"condition": "False", "failed": "True"}


def state_with(*claims: dict[str, Any]) -> PluginState:
    state = PluginState({"n1": [dev("d0"), dev("d1")]})
    for c in claims:
        add(state, c, owner=None)
    return state


@pytest.mark.parametrize("claims", [
    pytest.param([bound("pc", "d0", SUCCEEDED)], id="bound-claim-with-succeeded-binding-conditions"),
    pytest.param([bound("pc", "d0", None, binding=False)], id="bound-claim-without-binding-conditions"),
    pytest.param([bound("pc", "d0", SUCCEEDED), bound("pc2", "d1", SUCCEEDED)],
                 id="multi-claims-binding-conditions-all-success"),
])
async def test_claims_whose_binding_conditions_hold_are_reserved(claims: list[dict[str, Any]]) -> None:
    state = state_with(*claims)
    out = await decider(state, clock=lambda: NOW).decide(pod(*(c["metadata"]["name"] for c in claims)))
    assert isinstance(out, Placement) and out.node == "n1"
    assert [(p.allocation, p.reserve) for p in out.claims] == [(None, True)] * len(claims)


@pytest.mark.parametrize("claims", [
    pytest.param([bound("pc", "d0", FAILED)], id="bound-claim-with-failed-binding"),
    pytest.param([bound("pc", "d0", {}, minutes_ago=11)], id="bound-claim-with-timed-out-binding"),
    pytest.param([bound("pc", "d0", {"condition1": "True", "condition2": "False"}, minutes_ago=11)],
                 id="bound-claim-with-mixed-binding-conditions"),
    pytest.param([bound("ok", "d0", SUCCEEDED), bound("pc", "d1", FAILED)],
                 id="multi-claims-binding-conditions-one-fail"),
])
async def test_a_claim_whose_binding_failed_or_timed_out_is_given_back(claims: list[dict[str, Any]]) -> None:
    state = state_with(*claims)
    out = await decider(state, clock=lambda: NOW).decide(pod(*(c["metadata"]["name"] for c in claims)))
    assert isinstance(out, Unschedulable)
    assert [c["metadata"]["name"] for c in out.unavailable] == ["pc"]
    assert out.deallocate is not None and out.deallocate["metadata"]["name"] == "pc"


async def test_prebind_fail_with_binding_timeout_not_yet_timed_out_is_still_reserved() -> None:
    """prebind-fail-with-binding-timeout: allocated 10 s before the timeout, conditions not set yet: the
    pod is placed (the write pipeline then waits for the conditions and gives up at the timeout,
    test_bindingconds.py::test_waiter_gives_up_after_the_timeout)."""
    state = state_with(bound("pc", "d0", {}, minutes_ago=9))
    out = await decider(state, clock=lambda: NOW).decide(pod("pc"))
    assert isinstance(out, Placement)
