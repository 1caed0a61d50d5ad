"""Extended resources backed by DRA, pure parts (upstream extendeddynamicresources_test.go cases, in
our own words)."""

from __future__ import annotations

from typing import Any

import pytest

from structured_allocator.extres import (
    ANNOTATION,
    EXTENDED_BY_POD,
    claim_body,
    class_mapping,
    dra_demand,
    extended_claim_owner,
    extended_demand,
    find_extended_claim,
    fractional_device_count,
    requests_and_mappings,
    served_by_dra,
    status_patch,
)
from structured_allocator.nodefit import pod_demand

GPU = "gpu.draflow.example/gpu"


def cls(name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    spec = {"extendedResourceName": resource} if resource else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def ctr(name: str, requests: dict[str, str], sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests, "limits": requests}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"containers": containers, "initContainers": inits or []}}


def test_class_mapping_has_the_implicit_and_the_explicit_name() -> None:
    m = class_mapping({"gpu": cls("gpu", GPU), "fpga": cls("fpga")})
    assert m == {"deviceclass.resource.kubernetes.io/gpu": "gpu", GPU: "gpu",
                 "deviceclass.resource.kubernetes.io/fpga": "fpga"}


def test_two_classes_naming_one_resource_the_newer_then_the_lower_name_wins() -> None:
    older, newer = cls("a", GPU, "2026-01-01T00:00:00Z"), cls("b", GPU, "2026-02-01T00:00:00Z")
    assert class_mapping({"a": older, "b": newer})[GPU] == "b"
    assert class_mapping({"b": newer, "a": older})[GPU] == "b"
    assert class_mapping({"z": cls("z", GPU), "y": cls("y", GPU)})[GPU] == "y"


def test_only_mapped_names_are_dra_demand_and_device_plugin_nodes_do_not_serve_them_by_dra() -> None:
    p = pod([ctr("c", {GPU: "2", "cpu": "1", "other.example/x": "1"})])
    demand = dra_demand(pod_demand(p).requests, {GPU: "gpu"})
    assert demand == {GPU: 2}
    assert served_by_dra(demand, {}) == {GPU: 2}
    assert served_by_dra(demand, {GPU: 0}) == {GPU: 2}
    assert served_by_dra(demand, {GPU: 8}) == {}  # a device plugin advertises it: node fit counts it


def test_one_request_per_container_named_by_container_and_sorted_resource_index() -> None:
    p = pod([ctr("a", {GPU: "2", "cpu": "1"}), ctr("b", {"aaa.example/x": "1", GPU: "1"})])
    reqs, maps = requests_and_mappings(p, [GPU], {GPU: "gpu"})
    # sorted request names: a: [cpu, gpu...] -> index 1; b: [aaa..., gpu...] -> index 1
    assert reqs == [
        {"name": "container-0-request-1",
         "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}},
        {"name": "container-1-request-1",
         "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
    ]
    assert maps == [
        {"containerName": "a", "resourceName": GPU, "requestName": "container-0-request-1"},
        {"containerName": "b", "resourceName": GPU, "requestName": "container-1-request-1"},
    ]


def test_init_containers_reuse_later_devices_and_share_the_largest_extra_request() -> None:
    p = pod([ctr("main", {GPU: "1"})],
            inits=[ctr("i0", {GPU: "3"}), ctr("i1", {GPU: "1"}), ctr("i2", {GPU: "2"})])
    reqs, maps = requests_and_mappings(p, [GPU], {GPU: "gpu"})
    # i0 needs 3: reuses main's 1, adds 2 (container-0); i1 is covered by main; i2 adds 1 (container-2):
    # the init containers share the largest extra request, container-0 with 2.
    assert [(r["name"], r["exactly"]["count"]) for r in reqs] == [("container-0-request-0", 2),
                                                                   ("container-3-request-0", 1)]
    assert maps == [
        {"containerName": "main", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i0", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i0", "resourceName": GPU, "requestName": "container-0-request-0"},
        {"containerName": "i1", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i2", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i2", "resourceName": GPU, "requestName": "container-0-request-0"},
    ]


def test_sidecars_are_long_lived_and_unmapped_resources_are_ignored() -> None:
    p = pod([ctr("main", {GPU: "1"})], inits=[ctr("side", {GPU: "1"}, sidecar=True)])
    reqs, maps = requests_and_mappings(p, [GPU, "unmapped.example/x"], {GPU: "gpu"})
    assert [r["name"] for r in reqs] == ["container-0-request-0", "container-1-request-0"]
    assert [m["containerName"] for m in maps] == ["side", "main"]


def test_the_claim_is_owned_by_the_pod_and_found_again_only_for_that_incarnation() -> None:
    p = pod([ctr("c", {GPU: "1"})])
    body = claim_body(p, [{"name": "r"}])
    meta = body["metadata"]
    assert meta["generateName"] == "p-extended-resources-" and "name" not in meta
    assert meta["annotations"] == {ANNOTATION: "true"}
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid",
                                        "controller": True}]
    created = {**body, "metadata": {**meta, "name": "p-extended-resources-x"}}
    assert find_extended_claim(p, [created]) is created
    other = {**p, "metadata": {**p["metadata"], "uid": "other"}}
    assert find_extended_claim(other, [created]) is None
    plain = {"metadata": {**meta, "annotations": {}}}
    assert find_extended_claim(p, [plain]) is None


@pytest.mark.parametrize("name", ["c-1"])
def test_status_patch_records_name_and_mappings(name: str) -> None:
    maps = [{"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-0"}]
    patch = status_patch(pod([]), name, maps)
    assert patch["metadata"] == {"uid": "pod-uid"}
    assert patch["status"]["extendedResourceClaimStatus"] == {"requestMappings": maps,
                                                              "resourceClaimName": name}


def test_the_claims_index_finds_a_special_claim_of_an_earlier_attempt_by_pod_uid() -> None:
    p = pod([ctr("c", {GPU: "1"})])
    made = claim_body(p, [], name="p-extended-resources-x")
    assert extended_claim_owner(made) == ["pod-uid"]
    assert extended_claim_owner({"metadata": {"ownerReferences": made["metadata"]["ownerReferences"]}}) == []
    index = {"pod-uid": [made]}

    def by_index(name: str, value: str) -> list[dict[str, Any]]:
        assert name == EXTENDED_BY_POD
        return index.get(value, [])

    classes = {"gpu": cls("gpu", GPU)}
    demand = extended_demand(p, pod_demand(p).requests, classes, by_index)
    assert demand is not None and demand.demand == {GPU: 1} and demand.stale is made
    index.clear()
    demand = extended_demand(p, pod_demand(p).requests, classes, by_index)
    assert demand is not None and demand.stale is None
    ext = demand.for_node({}, {})
    assert ext is not None and ext.claim["metadata"]["name"] == "<extended-resources>"
    assert demand.for_node({}, {GPU: 4}) is None  # a device plugin serves it on that node
    plain = pod([ctr("c", {"cpu": "1"})])
    assert extended_demand(plain, pod_demand(plain).requests, classes, by_index) is None


IMPLICIT = "deviceclass.resource.kubernetes.io/gpu"


@pytest.mark.parametrize(("containers", "inits", "expected"), [
    ([ctr("a", {IMPLICIT: "2"})], [], None),
    ([ctr("a", {IMPLICIT: "1k"})], [], None),  # 1000: whole
    ([ctr("a", {"cpu": "500m", IMPLICIT: "1"})], [], None),  # only device counts must be whole
    ([ctr("a", {IMPLICIT: "500m"})], [],
     'container "a" asks for 500m of deviceclass.resource.kubernetes.io/gpu (resources.requests): '
     "a device count must be a whole number"),
    ([ctr("a", {IMPLICIT: "1"})], [ctr("setup", {IMPLICIT: "1.5"})], 'container "setup" asks for 1.5 of'),
], ids=["whole", "suffix", "cpu-fraction", "fraction", "init-fraction"])
def test_a_device_count_that_is_not_whole_is_named(
    containers: list[dict[str, Any]], inits: list[dict[str, Any]], expected: str | None,
) -> None:
    reason = fractional_device_count(pod(containers, inits))
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected), reason
