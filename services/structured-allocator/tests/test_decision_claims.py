"""Which claims a decision waits for (upstream ``resourceclaim.Name``, as kube-scheduler uses it): a
template claim without a status entry is not created yet; one whose status entry names no claim is not
needed at all and is skipped. In memory, over the fake informer caches of ``test_decision_budget``."""

from __future__ import annotations

from typing import Any

from sa_builders import dev
from test_decision_budget import FakeState, decider, pod_with

from structured_allocator.decision import Placement, Waiting


def pod_with_template_claim(state: FakeState, statuses: list[dict[str, Any]]) -> dict[str, Any]:
    pod = pod_with(state, "p", 1, None)
    pod["spec"]["resourceClaims"].append({"name": "extra", "resourceClaimTemplateName": "t"})
    pod["status"] = {"resourceClaimStatuses": statuses}
    return pod


async def test_a_template_claim_whose_status_entry_names_no_claim_is_not_needed() -> None:
    state = FakeState({"n1": [dev("d0", {"color": "c0"})]})
    out = await decider(state).decide(pod_with_template_claim(state, [{"name": "extra"}]))
    assert isinstance(out, Placement) and out.node == "n1"


async def test_a_template_claim_without_a_status_entry_is_waited_for() -> None:
    state = FakeState({"n1": [dev("d0", {"color": "c0"})]})
    out = await decider(state).decide(pod_with_template_claim(state, []))
    assert isinstance(out, Waiting)
    assert out.reason == 'waiting for the ResourceClaim of pod claim "extra" to be created'
