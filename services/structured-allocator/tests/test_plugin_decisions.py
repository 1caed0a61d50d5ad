"""kube-scheduler v1.37.1 DynamicResources ``TestPlugin`` cases about the decision, restated in memory
(upstream: PreEnqueue, PreFilter, Filter, Score and PostFilter on a fake clientset; here: one
``Decider.decide`` over fake informer caches, :mod:`test_decision_budget`). Each test names the upstream
case(s) it restates; ``plugin_map.py`` maps them. What ends up in the API (writes) is restated in
``integration/test_plugin_writes_integration.py``."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import DRIVER, alloc, claim, dclass, dev, first_available, req, res, sub
from test_decision_budget import FakeState, decider

from structured_allocator.core import Features
from structured_allocator.decision import Placement, Unschedulable, Waiting
from structured_allocator.nodes import claim_selector_reason

POD_UID = "uid-p"
PIN = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}


class PluginState(FakeState):
    """FakeState with the classes, node labels/status and claim index a case needs."""

    def __init__(self, nodes: dict[str, list[dict[str, Any]]], *, classes: list[dict[str, Any]] | None = None,
                 node_status: dict[str, dict[str, Any]] | None = None) -> None:
        super().__init__(nodes)
        if classes is None:
            classes = [dclass("gpu", f'device.driver == "{DRIVER}"')]
        self.classes = {c["metadata"]["name"]: c for c in classes}
        for name, node in self.nodes.items.items():
            node["metadata"]["labels"] = {"kubernetes.io/hostname": name}
            node["status"].update((node_status or {}).get(name, {}))
        self.claims.by_index = lambda index, value: []  # type: ignore[attr-defined]

    def classes_by_name(self) -> dict[str, dict[str, Any]]:
        return self.classes


def add(state: FakeState, c: dict[str, Any], *, owner: str | None = POD_UID) -> dict[str, Any]:
    name = c["metadata"]["name"]
    c["metadata"].update(namespace="ns", uid=f"uid-{name}")
    if owner:
        c["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner,
                                             "controller": True}]
    if (c.get("status") or {}).get("allocation"):
        state.assume.observe_claim(c, uid=c["metadata"]["uid"])
    state.claims.items[f"ns/{name}"] = c
    return c


def pod(*claim_names: str, template: bool = False, requests: dict[str, str] | None = None) -> dict[str, Any]:
    source = "resourceClaimTemplateName" if template else "resourceClaimName"
    container: dict[str, Any] = {"name": "c"}
    if requests:
        container["resources"] = {"requests": requests, "limits": requests}
    p: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "uid": POD_UID},
                         "spec": {"containers": [container],
                                  "resourceClaims": [{"name": f"c{i}", source: n if not template else "t"}
                                                     for i, n in enumerate(claim_names)]}}
    if template:
        p["status"] = {"resourceClaimStatuses": [{"name": f"c{i}", "resourceClaimName": n}
                                                 for i, n in enumerate(claim_names)]}
    return p


def reserved_for(uid: str) -> list[dict[str, str]]:
    return [{"resource": "pods", "name": uid, "uid": uid}]


# -- pods without claims ------------------------------------------------------------------------------


@pytest.mark.parametrize("requests", [None, {"cpu": "1"}],
                         ids=["empty", "empty-with-extended-resources-enabled"])
async def test_empty_a_pod_without_claims_is_placed_with_nothing_to_write(
        requests: dict[str, str] | None) -> None:
    state = PluginState({"n1": []}, node_status={"n1": {"allocatable": {"pods": "110", "cpu": "4"}}})
    out = await decider(state).decide(pod(requests=requests))
    assert isinstance(out, Placement) and out.node == "n1"
    assert out.claims == [] and out.extended is None


async def test_postfilter_no_claims_an_unschedulable_pod_without_claims_gives_nothing_back() -> None:
    state = PluginState({"n1": []}, node_status={"n1": {"allocatable": {"pods": "110", "cpu": "1"}}})
    out = await decider(state).decide(pod(requests={"cpu": "2"}))
    assert isinstance(out, Unschedulable) and out.deallocate is None
    assert "Insufficient cpu" in out.explanation.message()


# -- the pod's claims ---------------------------------------------------------------------------------


async def test_deleted_claim_a_claim_being_deleted_is_not_used() -> None:
    state = PluginState({"n1": [dev("d0")]})
    c = add(state, claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN)))
    c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    out = await decider(state).decide(pod("pc", template=True))
    assert isinstance(out, Unschedulable)
    assert out.explanation.message() == 'ResourceClaim "ns/pc" is being deleted'


async def test_wrong_claim_a_generated_claim_another_pod_owns_is_not_used() -> None:
    state = PluginState({"n1": [dev("d0")]})
    add(state, claim("pc", req("gpu")), owner="uid-other")
    out = await decider(state).decide(pod("pc", template=True))
    assert isinstance(out, Unschedulable)
    assert out.explanation.message() == 'ResourceClaim "ns/pc" was not created for this pod'


@pytest.mark.parametrize("template", [False, True], ids=["claim-reference", "claim-template"])
async def test_claim_reference_an_allocated_claim_is_only_reserved(template: bool) -> None:
    state = PluginState({"n0": [dev("d0")], "n1": [dev("d0")]})
    add(state, claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN)),
        owner=POD_UID if template else None)
    out = await decider(state).decide(pod("pc", template=template))
    assert isinstance(out, Placement) and out.node == "n1"  # where the allocation is
    (planned,) = out.claims
    assert planned.allocation is None and planned.reserve and planned.consumer is None


async def test_reserved_okay_a_claim_already_reserved_for_the_pod_needs_no_write() -> None:
    state = PluginState({"n1": [dev("d0")]})
    c = claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN))
    c["status"]["reservedFor"] = reserved_for(POD_UID)
    add(state, c, owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Placement) and out.node == "n1"
    assert [(p.allocation, p.reserve) for p in out.claims] == [(None, False)]


async def test_good_topology_a_label_selector_of_the_allocation_picks_the_node() -> None:
    state = PluginState({"n0": [dev("d0")], "n1": [dev("d0")], "n2": [dev("d0")]})
    by_label = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}
    add(state, claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=by_label)),
        owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Placement) and out.node == "n1"


@pytest.mark.parametrize("declared", [False, True], ids=["missing-feature", "with-feature"])
async def test_allocated_skip_node_operations_needs_a_node_declaring_the_feature(declared: bool) -> None:
    status = {"declaredFeatures": ["DRAOptionalNodeOperations"]} if declared else {}
    state = PluginState({"n1": [dev("d0")]}, node_status={"n1": status})
    result = res("gpu", "d0", pool="n1", skipNodeOperations=["All"])
    add(state, claim("pc", req("gpu"), allocation=alloc(result, node_selector=PIN)), owner=None)
    out = await decider(state).decide(pod("pc"))
    if declared:
        assert isinstance(out, Placement) and out.node == "n1"
        return
    assert isinstance(out, Unschedulable)
    assert "does not declare DRAOptionalNodeOperations" in out.explanation.message()
    # PostFilter gives it back
    assert out.deallocate is not None and out.deallocate["metadata"]["name"] == "pc"


@pytest.mark.parametrize(("results", "needs"), [
    pytest.param(None, False, id="nil"),
    pytest.param([], False, id="empty-results"),
    pytest.param([{}], False, id="no-skip-node-operations"),
    pytest.param([{"skipNodeOperations": ["All"]}], True, id="with-skip-node-operations"),
    pytest.param([{"skipNodeOperations": []}], False, id="empty-skip-node-operations"),
    pytest.param([{}, {"skipNodeOperations": ["All"]}], True, id="mixed-skip-node-operations"),
])
def test_allocation_result_requires_dra_optional_node_operations(results: list[dict[str, Any]] | None,
                                                                  needs: bool) -> None:
    allocation = None if results is None else {"devices": {"results": [
        {**res("gpu", f"d{i}"), **r} for i, r in enumerate(results)]}}
    plain = {"metadata": {"name": "n1"}, "status": {}}
    declared = {"metadata": {"name": "n1"}, "status": {"declaredFeatures": ["DRAOptionalNodeOperations"]}}
    fixed = [allocation] if allocation is not None else []
    assert (claim_selector_reason(plain, fixed) is not None) is needs
    assert claim_selector_reason(declared, fixed) is None


# -- devices in use -----------------------------------------------------------------------------------


async def test_exhausted_resources_in_informer_cache() -> None:
    state = PluginState({"n1": [dev("d0")]})
    add(state, claim("pc", req("gpu")), owner=None)
    add(state, claim("other", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN)),
        owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Unschedulable) and out.deallocate is None


@pytest.mark.parametrize(("held", "fits"), [("d0", False), ("d0-other", True)],
                         ids=["exhausted-resources-in-flight-claim", "other-resources-in-flight-claim"])
async def test_resources_held_by_an_in_flight_claim(held: str, fits: bool) -> None:
    state = PluginState({"n1": [dev("d0"), dev("d0-other")] if fits else [dev("d0")]})
    add(state, claim("pc", req("gpu")), owner=None)
    add(state, claim("other", req("gpu")), owner=None)
    held_alloc = alloc(res("gpu", held, pool="n1"), node_selector=PIN)
    state.assume.assume("uid-other", "ns/other", held_alloc, "ns/q")
    out = await decider(state).decide(pod("pc"))
    if not fits:
        assert isinstance(out, Unschedulable)
        return
    assert isinstance(out, Placement)
    (planned,) = out.claims
    assert planned.allocation is not None
    assert [r["device"] for r in planned.allocation["devices"]["results"]] == ["d0"]


# -- broken input -------------------------------------------------------------------------------------

BROKEN = f'device.attributes["{DRIVER}"].healthy'


@pytest.mark.parametrize("nodes", [2, 3], ids=["one-of-two-nodes", "one-of-three-nodes"])
async def test_cel_runtime_error_for_one_node_keeps_the_pod_pending(nodes: int) -> None:
    """Nodes "a..." have the attribute and fit; "z-broken" has not: the selector fails there. Upstream
    keeps the pod pending (something is wrong with it) instead of placing it on a node that works."""
    healthy = {f"a{i}": [dev("d0", {"healthy": True})] for i in range(nodes - 1)}
    state = PluginState({**healthy, "z-broken": [dev("d0")]})
    add(state, claim("pc", req("gpu", selectors=(BROKEN,))), owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Unschedulable)
    assert "healthy" in out.explanation.message()


@pytest.mark.parametrize("request_", [req("r", "missing"), first_available("r", sub("s1", "missing"))],
                         ids=["claim-with-request-with-unknown-device-class",
                              "claim-with-prioritized-list-unknown-device-class"])
async def test_unknown_device_class_is_named(request_: dict[str, Any]) -> None:
    state = PluginState({"n1": [dev("d0")]})
    add(state, claim("pc", request_), owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Unschedulable)
    full = "r" if "exactly" in request_ else "r/s1"
    want = f'DeviceClass "missing" does not exist (claim "ns/pc", request "{full}")'
    assert want in out.explanation.message()


async def test_missing_class_no_device_class_at_all() -> None:
    state = PluginState({"n1": [dev("d0")]}, classes=[])
    add(state, claim("pc", req("gpu")), owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Unschedulable)
    assert 'DeviceClass "gpu" does not exist (claim "ns/pc", request "gpu")' in out.explanation.message()


async def test_a_claim_being_written_for_another_pod_is_waited_for() -> None:
    state = PluginState({"n1": [dev("d0")]})
    add(state, claim("pc", req("gpu")), owner=None)
    state.assume.assume("uid-pc", "ns/pc", alloc(res("gpu", "d0", pool="n1"), node_selector=PIN), "ns/q")
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Waiting) and out.on_claim == "ns/pc"


# -- extended resources backed by DRA ------------------------------------------------------------------

GPU = "example.com/gpu"


def ext_classes(*names: tuple[str, str | None]) -> list[dict[str, Any]]:
    out = []
    for cls, resource in names:
        c = dclass(cls, f'device.driver == "{DRIVER}"')
        if resource:
            c["spec"]["extendedResourceName"] = resource
        out.append(c)
    return out


def node_with(allocatable: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {"n1": {"allocatable": {"pods": "110", **allocatable}}}


async def test_extended_resource_name_with_zero_allocatable_is_served_by_dra() -> None:
    state = PluginState({"n1": [dev("d0")]}, classes=ext_classes(("gpu", GPU)),
                        node_status=node_with({GPU: "0"}))
    out = await decider(state).decide(pod(requests={GPU: "1"}))
    assert isinstance(out, Placement) and out.extended is not None and out.extended.allocation is not None
    assert [r["request"] for r in out.extended.allocation["devices"]["results"]] == ["container-0-request-0"]


async def test_non_dra_extended_resource_name_with_zero_allocatable_does_not_fit() -> None:
    state = PluginState({"n1": [dev("d0")]}, classes=ext_classes(("gpu", None)),
                        node_status=node_with({GPU: "0"}))
    out = await decider(state).decide(pod(requests={GPU: "1"}))
    assert isinstance(out, Unschedulable)
    assert f"Insufficient {GPU}" in out.explanation.message()


async def test_extended_resource_name_no_resource() -> None:
    state = PluginState({"n1": []}, classes=ext_classes(("gpu", GPU)))
    out = await decider(state).decide(pod(requests={GPU: "1"}))
    assert isinstance(out, Unschedulable) and out.stale_extended is None


async def test_extended_resource_one_device_plugin_one_dra() -> None:
    """The node's device plugin serves example.com/gpu; DRA serves only example.com/gpu2 (the second of
    the container's sorted resources: request index 1)."""
    state = PluginState({"n1": [dev("d0")]}, classes=ext_classes(("gpu", GPU), ("gpu2", GPU + "2")),
                        node_status=node_with({GPU: "1"}))
    out = await decider(state).decide(pod(requests={GPU: "1", GPU + "2": "1"}))
    assert isinstance(out, Placement) and out.extended is not None
    spec_requests = out.extended.claim["spec"]["devices"]["requests"]
    assert [(r["name"], r["exactly"]["deviceClassName"]) for r in spec_requests] == [
        ("container-0-request-1", "gpu2")]


# -- devices shared by allocations (DRAConsumableCapacity) --------------------------------------------


@pytest.mark.parametrize("gate", [True, False])
@pytest.mark.parametrize("seen", ["informer", "in-flight"])
async def test_gather_allocated_state_a_shared_allocation_blocks_the_device_with_the_gate_off(
        gate: bool, seen: str) -> None:
    """TestGatherAllocatedState: with DRAConsumableCapacity an allocation with a shareID leaves a
    multi-allocatable device to others; with the gate off it counts as an ordinary allocation of the
    device (upstream: ``disabled-*-allocated-claim-with-capacity``), so nobody else gets it."""
    shared = dev("d0", allowMultipleAllocations=True)
    state = PluginState({"n1": [shared]})
    add(state, claim("pc", req("gpu")), owner=None)
    share_id = "5d0f0f0e-0000-4000-8000-000000000001"
    taken = alloc(res("gpu", "d0", pool="n1", shareID=share_id), node_selector=PIN)
    if seen == "informer":
        add(state, claim("other", req("gpu"), allocation=taken), owner=None)
    else:
        add(state, claim("other", req("gpu")), owner=None)
        state.assume.assume("uid-other", "ns/other", taken, "ns/q")
    out = await decider(state, features=Features(consumable_capacity=gate)).decide(pod("pc"))
    assert isinstance(out, Placement if gate else Unschedulable)


async def test_patch_node_allocatable_no_claims_for_this_pod_means_no_status() -> None:
    """TestPatchNodeAllocatableResourceClaimStatus "no node allocatable resource claims for this pod":
    with the gate on, a pod whose devices carry no node resources gets no status to write."""
    state = PluginState({"n1": [dev("d0")]}, node_status={"n1": {"allocatable": {"pods": "110", "cpu": "4"}}})
    add(state, claim("pc", req("gpu")), owner=None)
    out = await decider(state, node_allocatable=True).decide(pod("pc"))
    assert isinstance(out, Placement) and not out.node_allocatable


# -- PostFilter: only a claim found unavailable is given back -----------------------------------------


async def test_postfilter_keeps_an_available_allocation_when_something_else_does_not_fit() -> None:
    """Upstream deallocates in PostFilter only claims Filter found unavailable (their node selector ruled
    out a node that passed the other filters, or their binding failed); a claim whose node does not fit
    for another reason (here cpu) stays allocated: deallocating it would not help."""
    state = PluginState({"n1": [dev("d0")]}, node_status={"n1": {"allocatable": {"pods": "110", "cpu": "1"}}})
    add(state, claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN)),
        owner=None)
    out = await decider(state).decide(pod("pc", requests={"cpu": "2"}))
    assert isinstance(out, Unschedulable) and "Insufficient cpu" in out.explanation.message()
    assert out.deallocate is None and out.unavailable == []


async def test_postfilter_keeps_an_available_allocation_when_another_claim_does_not_fit() -> None:
    state = PluginState({"n1": [dev("d0")]})
    add(state, claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN)),
        owner=None)
    add(state, claim("more", req("gpu")), owner=None)  # no free device anywhere
    out = await decider(state).decide(pod("pc", "more"))
    assert isinstance(out, Unschedulable) and out.deallocate is None


async def test_postfilter_gives_back_the_claim_another_node_found_unavailable() -> None:
    """wrong-topology with a second node: n0 passes the node filters, the claim's selector rules it out."""
    state = PluginState({"n0": [dev("d0")], "n1": [dev("d0")]},
                        node_status={"n0": {"allocatable": {"pods": "110", "cpu": "4"}},
                                     "n1": {"allocatable": {"pods": "110", "cpu": "1"}}})
    add(state, claim("pc", req("gpu"), allocation=alloc(res("gpu", "d0", pool="n1"), node_selector=PIN)),
        owner=None)
    out = await decider(state).decide(pod("pc", requests={"cpu": "2"}))
    assert isinstance(out, Unschedulable)
    assert out.deallocate is not None and out.deallocate["metadata"]["name"] == "pc"


IMPLICIT = "deviceclass.resource.kubernetes.io/gpu"


@pytest.mark.parametrize("containers", [
    pytest.param([{IMPLICIT: "1", GPU: "2"}], id="implicit-extended-resource-name-with-resources"),
    pytest.param([{IMPLICIT: "1"}, {GPU: "2"}],
                 id="implicit-extended-resource-name-two-containers-with-resources"),
])
async def test_implicit_and_explicit_names_of_one_class(containers: list[dict[str, str]]) -> None:
    """The class's implicit name and its extendedResourceName both map to it: one special claim, one request
    per container and name (sorted: the implicit name first), three devices."""
    state = PluginState({"n1": [dev(f"d{i}") for i in range(4)]}, classes=ext_classes(("gpu", GPU)))
    the_pod = pod()
    the_pod["spec"]["containers"] = [{"name": f"c{i}", "resources": {"requests": r, "limits": r}}
                                     for i, r in enumerate(containers)]
    out = await decider(state).decide(the_pod)
    assert isinstance(out, Placement) and out.extended is not None and out.extended.allocation is not None
    requests = [(r["name"], r["exactly"]["count"]) for r in out.extended.claim["spec"]["devices"]["requests"]]
    second = "container-0-request-1" if len(containers) == 1 else "container-1-request-0"
    assert requests == [("container-0-request-0", 1), (second, 2)]
    assert len(out.extended.allocation["devices"]["results"]) == 3
