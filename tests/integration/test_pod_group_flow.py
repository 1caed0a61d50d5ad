"""Claims shared by a PodGroup (DRAWorkloadResourceClaims, beta in v1.37), end to end with the five services:
a PodGroup (``scheduling.k8s.io/v1beta1``) lists a template claim; its member pods list the same claim →
claim-controller makes one claim for the group (owned by the PodGroup, recorded in its status and in every
member's status) → structured-allocator places the members in one pod-group cycle: the first allocates the
claim, the others use that pending allocation; it is reserved for the PodGroup (one ``reservedFor`` entry
for all members, as kube-scheduler's ``BindTo``) and every member is bound to the node → kubelet-dra-shim
prepares it → all Running. A pod outside the group with the same template gets its own claim. The members
end: the claim stays reserved for the group (its pods may come back); the PodGroup is deleted: the
claim-controller lifts its protection finalizer (no pod of it is active), the reservation goes, the claim
is deallocated and deleted.

Before: the gate was off in the test environment (no PodGroup API); a member got a claim of its own.

Second test (PodGroupPostFilter, end to end): the group's claim is allocated on node 0 for its first pod;
that pod ends, the claim stays the group's; the group's next pod can only run on node 1: the group cannot
be placed, the allocator gives the claim back, allocates it on node 1, the pod runs there (the shim
prepares it on the new node) and another group's pod takes node 0's freed device. Before: the next pod
was unschedulable for ever and node 0's device stayed held.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from go_driver_kit import go_api_check

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import EVENTS, POD_GROUPS, PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.featuregates import WANTED_GATES
from draflow_testenv.fleetflow import ServiceFlow

pytestmark = pytest.mark.integration

GROUP = "trainers"
MEMBERS = ("trainer-0", "trainer-1", "trainer-2")


def _pod(flow: ServiceFlow, name: str, group: str | None, node: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": flow.scheduler,
        "nodeSelector": {"kubernetes.io/hostname": flow.nodes[node]},
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "gpu"}]}}],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.mark.timeout(600)
async def test_a_podgroups_claim_is_made_once_reserved_for_the_group_and_shared_by_its_running_pods(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    assert "DRAWorkloadResourceClaims" in WANTED_GATES and "GenericWorkload" in WANTED_GATES
    ns = await make_namespace("podgroup")
    suffix = ns.rpartition("-")[2]
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=1, gpus=4)
    fleet = Path(tempfile.mkdtemp(prefix="dpg-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects()
        group = await kube.create(POD_GROUPS, {
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": GROUP},
            "spec": {"schedulingPolicy": {"basic": {}},
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}},
            namespace=ns)
        assert group["spec"].get("resourceClaims"), "the API server dropped PodGroup.spec.resourceClaims"
        for name in MEMBERS:
            await kube.create(PODS, _pod(flow, name, GROUP), namespace=ns)
        await kube.create(PODS, _pod(flow, "solo", None), namespace=ns)

        pods = {name: await flow.wait_running(name) for name in (*MEMBERS, "solo")}
        (shared_name,) = {(await flow.claim_of(pods[name]))["metadata"]["name"] for name in MEMBERS}
        shared = await kube.get(RESOURCE_CLAIMS, shared_name, namespace=ns)
        meta = shared["metadata"]
        assert meta["name"].startswith(f"{GROUP}-gpu-")
        assert meta["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        assert [(o["apiVersion"], o["kind"], o["name"], o["uid"], o.get("controller"))
                for o in meta["ownerReferences"]] == [
            ("scheduling.k8s.io/v1beta1", "PodGroup", GROUP, group["metadata"]["uid"], True)]
        assert shared["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                                    "name": GROUP, "uid": group["metadata"]["uid"]}]
        assert len(shared["status"]["allocation"]["devices"]["results"]) == 1
        recorded = (await kube.get(POD_GROUPS, GROUP, namespace=ns))["status"]["resourceClaimStatuses"]
        assert recorded == [{"name": "gpu", "resourceClaimName": shared_name}]

        solo = await flow.claim_of(pods["solo"])
        assert solo["metadata"]["name"] != shared_name
        assert [r["uid"] for r in solo["status"]["reservedFor"]] == [pods["solo"]["metadata"]["uid"]]
        # A Go client's strict decoding and upstream's validation of the PodGroup's status, the claims
        # reserved for a group and the pods (hack/go-api-check).
        report = await go_api_check(testenv, flow)
        assert report["problems"] == [], report["problems"]
        checked = report["checked"]
        assert checked["PodGroup"] == 1 and checked["ResourceClaim"] == 2, checked

        for name in MEMBERS:
            await kube.delete(PODS, name, namespace=ns)

        async def members_gone() -> bool:
            for name in MEMBERS:
                try:
                    await kube.get(PODS, name, namespace=ns)
                    return False
                except NotFound:
                    pass
            return True

        await flow.until(members_gone, "the group's pods deleted")
        kept = await kube.get(RESOURCE_CLAIMS, shared_name, namespace=ns)
        # Still the group's: it may run pods again (upstream drops a PodGroup's entry only with the group).
        assert kept["status"]["reservedFor"] == shared["status"]["reservedFor"]
        assert kept["status"].get("allocation")

        await kube.delete(POD_GROUPS, GROUP, namespace=ns)
        # The API server's PodGroupProtection admission gives every PodGroup a finalizer; the
        # claim-controller lifts it (as kube-controller-manager's podgroup-protection controller) since
        # no pod of the group is active, then the group's claim goes.
        await flow.wait_claim_gone(shared_name, "the PodGroup gone, its claim deallocated and deleted")
        with pytest.raises(NotFound):
            await kube.get(POD_GROUPS, GROUP, namespace=ns)
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()


@pytest.mark.timeout(600)
async def test_a_groups_claim_on_a_node_its_next_pod_cannot_use_is_given_back_and_both_groups_run(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("podgroup-pf")
    suffix = ns.rpartition("-")[2]
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=2, gpus=1)
    fleet = Path(tempfile.mkdtemp(prefix="dpf-", dir="/tmp"))
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects()
        group_claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        for name, claims in ((GROUP, group_claims), ("others", [])):
            await kube.create(POD_GROUPS, {
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
                "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": claims}}, namespace=ns)
        await kube.create(PODS, _pod(flow, "first", GROUP), namespace=ns)
        first = await flow.wait_running("first")
        shared = (await flow.claim_of(first))["metadata"]["name"]
        await kube.delete(PODS, "first", namespace=ns)

        async def first_gone() -> bool:
            try:
                await kube.get(PODS, "first", namespace=ns)
            except NotFound:
                return True
            return False

        await flow.until(first_gone, "the group's first pod gone")
        held = await kube.get(RESOURCE_CLAIMS, shared, namespace=ns)
        assert flow.nodes[0] in str(held["status"]["allocation"]["nodeSelector"])  # still the group's

        await kube.create(PODS, _pod(flow, "next", GROUP, node=1), namespace=ns)
        await kube.create(PODS, _pod(flow, "other", "others", node=0), namespace=ns)
        assert (await flow.wait_running("next"))["spec"]["nodeName"] == flow.nodes[1]
        assert (await flow.wait_running("other"))["spec"]["nodeName"] == flow.nodes[0]
        moved = await kube.get(RESOURCE_CLAIMS, shared, namespace=ns)
        assert flow.nodes[1] in str(moved["status"]["allocation"]["nodeSelector"])
        assert [r["name"] for r in moved["status"]["reservedFor"]] == [GROUP]

        async def given_back() -> str | None:
            events = await kube.list(EVENTS, ns, field_selector="involvedObject.name=next")
            return next((e["message"] for e in events["items"] if e["reason"] == "ClaimDeallocated"), None)

        message = await flow.until(given_back, "the ClaimDeallocated Event of the group's next pod")
        assert message.startswith(f'pod group "{ns}/{GROUP}" cannot be placed: deallocated ResourceClaim')
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
