"""The allocator follows the DRA feature gates the test environment's kube-apiserver has on: list-type
attributes, compatibility groups and derived attributes, with the real apiserver storing the alpha fields
and the real allocator placing the pods (``--feature-gates`` switches a gate off again)."""

from __future__ import annotations

from typing import Any

import pytest
from sa_kit import Kit

from draflow_runtime.kube import NODES, RESOURCE_CLAIMS, RESOURCE_SLICES
from draflow_testenv.featuregates import WANTED_GATES

pytestmark = pytest.mark.integration


def results(claim: dict[str, Any]) -> list[str]:
    return [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]


async def create_slice(kit: Kit, name: str, spec: dict[str, Any]) -> None:
    await kit.kube.create(RESOURCE_SLICES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": kit.driver, **spec}})
    kit.cluster_objects.append((RESOURCE_SLICES, name))


async def claim_pod(kit: Kit, name: str, devices: dict[str, Any]) -> None:
    await kit.kube.create(RESOURCE_CLAIMS, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                            "metadata": {"name": name}, "spec": {"devices": devices}},
                          kit.namespace)
    await kit.pod(name, {"gpu": {"resourceClaimName": name}})


def request(kit: Kit, count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": kit.device_class, "count": count, **extra}}


async def test_list_attributes_are_matched_as_sets(kit: Kit) -> None:
    assert "DRAListTypeAttributes" in WANTED_GATES
    node = await kit.node("n")
    await create_slice(kit, f"{node}-links", {
        "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"links": {"strings": links}}}
                    for i, links in enumerate([["a", "b"], ["c"], ["b", "d"]])]})
    await kit.device_class_()
    await kit.start()
    await claim_pod(kit, "p", {"requests": [request(kit, 2)],
                               "constraints": [{"matchAttribute": f"{kit.driver}/links"}]})
    assert await kit.wait_bound("p") == node
    assert results(await kit.claim_of("p")) == ["gpu-0", "gpu-2"]


async def grouped_pool(kit: Kit) -> str:
    node = await kit.node("n")
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}

    def device(name: str, group: str) -> dict[str, Any]:
        return {"name": name, "consumesCounters": [
            {"counterSet": "set", "counters": {"mem": {"value": "1"}}, "compatibilityGroups": [group]}]}

    await create_slice(kit, f"{node}-counters", {
        "nodeName": node, "pool": pool,
        "sharedCounters": [{"name": "set", "counters": {"mem": {"value": "4"}}}]})
    await create_slice(kit, f"{node}-devices", {
        "nodeName": node, "pool": pool,
        "devices": [device("mig-0", "mig"), device("vgpu-0", "vgpu"), device("mig-1", "mig")]})
    await kit.device_class_()
    return node


async def test_compatibility_groups_hold_across_pods(kit: Kit) -> None:
    node = await grouped_pool(kit)
    await kit.start()
    await claim_pod(kit, "first", {"requests": [request(kit)]})
    assert await kit.wait_bound("first") == node
    assert results(await kit.claim_of("first")) == ["mig-0"]
    # vgpu-0 comes next in the slice but shares no group with the allocated mig-0.
    await claim_pod(kit, "second", {"requests": [request(kit)]})
    assert await kit.wait_bound("second") == node
    assert results(await kit.claim_of("second")) == ["mig-1"]


async def test_with_compatibility_groups_switched_off_the_grouped_pool_is_not_used(kit: Kit) -> None:
    await grouped_pool(kit)
    await kit.start(feature_gates="DRADeviceCompatibilityGroups=false")
    await claim_pod(kit, "p", {"requests": [request(kit)]})
    message = await kit.wait_condition("p", "incomplete pools skipped")
    assert kit.driver in message


async def test_derived_attributes_align_devices_of_two_drivers(kit: Kit) -> None:
    node = await kit.node("n")
    await create_slice(kit, f"{node}-numa", {
        "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"topology": {"string": topology}, "numa": {"int": 9}}}
                    for i, topology in enumerate(["socket-0/numa-0", "socket-0/numa-1", "socket-1/numa-0"])]})
    await kit.device_class_()
    await kit.start()
    # Two devices on the same NUMA index, read from the topology string, not the (useless) numa attribute.
    derived = [{"name": "derived/numa",
                "expression": f'device.attributes["{kit.driver}"].topology.split("/")[1]'}]
    await claim_pod(kit, "p", {"requests": [request(kit, 2, derivedAttributes=derived)],
                               "constraints": [{"matchAttribute": "derived/numa"}]})
    assert await kit.wait_bound("p") == node
    assert results(await kit.claim_of("p")) == ["gpu-0", "gpu-2"]


async def test_devices_skipping_node_operations_go_to_the_node_that_declares_the_feature(kit: Kit) -> None:
    assert "DRAOptionalNodeOperations" in WANTED_GATES

    async def skipping_slice(node: str) -> None:
        await create_slice(kit, f"{node}-skip", {
            "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "skipNodeOperations": ["*"], "devices": [{"name": "gpu-0"}]})

    plain = await kit.node("plain")
    await skipping_slice(plain)
    await kit.device_class_()
    await kit.start()
    await claim_pod(kit, "p", {"requests": [request(kit)]})
    await kit.wait_condition("p")  # the only node does not declare the feature
    declaring = await kit.node("declaring")
    await kit.kube.patch(NODES, declaring, {"status": {"declaredFeatures": ["DRAOptionalNodeOperations"]}},
                         subresource="status")
    await skipping_slice(declaring)
    assert await kit.wait_bound("p") == declaring
    [result] = (await kit.claim_of("p"))["status"]["allocation"]["devices"]["results"]
    assert result["skipNodeOperations"] == ["*"]
