"""Prepare and unprepare over real gRPC unix sockets, reading claims from a real kube-apiserver.

Clients are the stubs generated from our protos, i.e. what a kubelet (or kubelet-dra-shim) sends. Every test
with a driver runs twice (``driver_identity``): as the admin and with only the driver's deploy/kustomize RBAC.
"""

from __future__ import annotations

import json
import uuid

import pytest
from rd_harness import DRIVER, Driver, allocated_claim, cdi_file, claim_ref, sharing

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1beta1 import api_pb2 as dra_v1beta1
from draflow_runtime.kube import RESOURCE_CLAIMS
from draflow_runtime.passedclaims import claims_metadata
from draflow_testenv.wait import eventually
from reference_driver import store
from reference_driver.fleet import Fleet
from reference_driver.inventory import gpu_uuid
from reference_driver.settings import DriverSettings

pytestmark = pytest.mark.integration


async def test_prepare_over_v1_and_v1beta1_is_idempotent(driver, kube, make_namespace, device_class,
                                                         validate_cdi):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, config=sharing("Short"))
    uid = claim["metadata"]["uid"]

    request = dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)])
    first = await driver.v1().NodePrepareResources(request)
    assert list(first.claims) == [uid]
    result = first.claims[uid]
    assert result.error == ""
    assert [(d.pool_name, d.device_name, list(d.request_names), list(d.cdi_device_ids))
            for d in result.devices] == [
        (driver.node_name, "gpu-1", ["gpu"], [f"{DRIVER}/gpu={uid}-gpu-1"])]
    assert not result.devices[0].HasField("share_id")

    spec = json.loads(cdi_file(driver, uid).read_text())
    assert validate_cdi(spec) == []
    env = spec["devices"][0]["containerEdits"]["env"]
    assert f"DRAFLOW_GPU_1={gpu_uuid(driver.node_name, 1)}" in env
    assert "DRAFLOW_GPU_1_TIMESLICE_INTERVAL=Short" in env

    again = await driver.v1beta1().NodePrepareResources(
        dra_v1beta1.NodePrepareResourcesRequest(claims=[claim_ref(claim, dra_v1beta1)]))
    beta = again.claims[uid]
    assert beta.error == ""
    assert [(d.device_name, list(d.cdi_device_ids)) for d in beta.devices] == [
        ("gpu-1", [f"{DRIVER}/gpu={uid}-gpu-1"])]
    assert (await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)]))) == first


async def test_invalid_opaque_config_fails_only_that_claim(driver, kube, make_namespace, device_class):
    ns = await make_namespace("rd")
    good = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-2")
    bad = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-3",
                                config=sharing("Sometimes"))
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(good), claim_ref(bad)]))
    good_uid, bad_uid = good["metadata"]["uid"], bad["metadata"]["uid"]
    assert set(response.claims) == {good_uid, bad_uid}
    assert response.claims[good_uid].error == ""
    assert [d.device_name for d in response.claims[good_uid].devices] == ["gpu-2"]
    assert "sharing.timeSlicing.interval" in response.claims[bad_uid].error
    assert not response.claims[bad_uid].devices
    assert cdi_file(driver, good_uid).exists()
    assert not cdi_file(driver, bad_uid).exists()


async def test_missing_replaced_and_unallocated_claims_fail_one_by_one(driver, kube, make_namespace,
                                                                        device_class):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-4")
    unallocated = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "pending"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }, namespace=ns)
    replaced = dra_v1.Claim(namespace=ns, name=claim["metadata"]["name"], uid=str(uuid.uuid4()))
    missing = dra_v1.Claim(namespace=ns, name="nope", uid=str(uuid.uuid4()))
    response = await driver.v1().NodePrepareResources(dra_v1.NodePrepareResourcesRequest(
        claims=[replaced, missing, claim_ref(unallocated), claim_ref(claim)]))
    assert "was replaced" in response.claims[replaced.uid].error
    assert "not found" in response.claims[missing.uid].error
    assert "not allocated" in response.claims[unallocated["metadata"]["uid"]].error
    assert response.claims[claim["metadata"]["uid"]].error == ""


async def test_unprepare_removes_the_cdi_file_and_unknown_claims_succeed(driver, kube, make_namespace,
                                                                         device_class):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-5")
    uid = claim["metadata"]["uid"]
    await driver.v1().NodePrepareResources(dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)]))
    assert cdi_file(driver, uid).exists()

    unknown = dra_v1.Claim(namespace=ns, name="never-prepared", uid=str(uuid.uuid4()))
    response = await driver.v1().NodeUnprepareResources(
        dra_v1.NodeUnprepareResourcesRequest(claims=[claim_ref(claim), unknown]))
    assert {k: v.error for k, v in response.claims.items()} == {uid: "", unknown.uid: ""}
    assert not cdi_file(driver, uid).exists()
    assert uid not in driver.node.state.prepared_claims
    beta = await driver.v1beta1().NodeUnprepareResources(
        dra_v1beta1.NodeUnprepareResourcesRequest(claims=[claim_ref(claim, dra_v1beta1)]))
    assert beta.claims[uid].error == ""


async def test_prepared_claims_survive_a_driver_restart(kube, make_namespace, device_class, short_tmp,
                                                        driver_identity):
    settings = DriverSettings(
        node_name="rd-restart", registry_dir=str(short_tmp / "reg"), plugins_dir=str(short_tmp / "pl"),
        cdi_root=str(short_tmp / "cdi"), state_dir=str(short_tmp / "st"), http_port=0,
    )
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, "rd-restart", device="gpu-0")
    request = dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)])
    fleet = Fleet(settings, driver_identity.kube)
    await fleet.start()
    first = Driver(fleet, short_tmp)
    before = await first.v1().NodePrepareResources(request)
    await first.close()

    fleet = Fleet(settings, driver_identity.kube)  # a new process would do the same: load the checkpoint
    await fleet.start()
    second = Driver(fleet, short_tmp)
    try:
        assert claim["metadata"]["uid"] in second.node.state.prepared_claims
        assert await second.v1().NodePrepareResources(request) == before
    finally:
        await second.close()


async def test_a_device_prepared_for_one_claim_is_refused_to_another_unless_it_is_shareable(
    driver, kube, make_namespace, device_class
):
    """The driver is the last line of defence (upstream's kubeletplugin contract): two claims naming the
    same exclusive device, the second gets a per-claim error and the first stays prepared; unprepare of
    the first frees the device; a device with allowMultipleAllocations serves both."""
    ns = await make_namespace("rd")
    first = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-6")
    second = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-6")
    uid1, uid2 = first["metadata"]["uid"], second["metadata"]["uid"]
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(first)]))
    assert response.claims[uid1].error == ""
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(second), claim_ref(first)]))
    error = response.claims[uid2].error
    name1 = first["metadata"]["name"]
    assert f"device {driver.node_name}/gpu-6 is already prepared for claim {ns}/{name1}" in error
    assert "does not allow multiple allocations" in error
    assert not response.claims[uid2].devices and not cdi_file(driver, uid2).exists()
    assert response.claims[uid1].error == "" and cdi_file(driver, uid1).exists()
    assert set(driver.node.state.prepared_claims) >= {uid1} and uid2 not in driver.node.state.prepared_claims

    await driver.v1().NodeUnprepareResources(dra_v1.NodeUnprepareResourcesRequest(claims=[claim_ref(first)]))
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(second)]))
    assert response.claims[uid2].error == ""

    # The same node with the consumable profile: every GPU allows multiple allocations.
    (driver.root / "inventory.json").write_text(json.dumps({"gpuCount": 8, "profile": "consumable"}))
    gpu7 = (driver.node_name, "gpu-7")
    await eventually(lambda: driver.node.devices()[gpu7].allow_multiple_allocations,
                     10, "the consumable inventory loaded")
    shared = [await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-7") for _ in "ab"]
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(c) for c in shared]))
    assert [response.claims[c["metadata"]["uid"]].error for c in shared] == ["", ""]


async def test_prepare_uses_the_claim_the_caller_passed_instead_of_reading_it(driver, kube, make_namespace,
                                                                               device_class):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-3")
    uid = claim["metadata"]["uid"]
    # Gone from the API server after the caller read it: only the passed copy can make the prepare work.
    await kube.delete(RESOURCE_CLAIMS, claim["metadata"]["name"], namespace=ns)
    request = dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)])

    unpassed = await driver.v1().NodePrepareResources(request)
    assert unpassed.claims[uid].error == f"claim {ns}/{claim['metadata']['name']} not found"

    other = {**claim, "metadata": {**claim["metadata"], "name": "someone-else"}}
    misnamed = await driver.v1().NodePrepareResources(request, metadata=claims_metadata([other]))
    assert "not found" in misnamed.claims[uid].error  # a passed claim must be the one the request names

    passed = await driver.v1().NodePrepareResources(request, metadata=claims_metadata([claim]))
    assert passed.claims[uid].error == ""
    assert [(d.device_name, list(d.cdi_device_ids)) for d in passed.claims[uid].devices] == [
        ("gpu-3", [f"{DRIVER}/gpu={uid}-gpu-3"])]
    assert cdi_file(driver, uid).exists()
    on_disk, _ = store.replay(driver.node.state.checkpoint_path.parent, driver.node_name)  # + journals
    assert uid in on_disk.prepared_claims


async def test_a_batch_passing_many_claims_stays_under_the_metadata_limit(driver, kube, make_namespace,
                                                                         device_class):
    """kubelet-dra-shim passes claims up to its budget and leaves the rest for the driver to read: a
    pod with many claims never makes the call too big for the server (grpc refuses metadata over 8 KiB
    at random, over 16 KiB always)."""
    ns = await make_namespace("rd")
    claims = [await allocated_claim(kube, ns, device_class, driver.node_name, device=f"gpu-{i}",
                                    config=sharing("Short")) for i in range(4, 8)]
    # Forty claims' worth of metadata: the real four, each also under 9 other UIDs (never asked for).
    copies = [{**c, "metadata": {**c["metadata"], "uid": f"{c['metadata']['uid']}-{k}"}}
              for c in claims for k in range(9)]
    metadata = claims_metadata([*claims, *copies])
    assert 0 < len(metadata) < len(claims) + len(copies)  # the budget cut the list
    request = dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(c) for c in claims])
    for _ in range(5):  # the server's soft limit refuses at random: one call could pass by luck
        response = await driver.v1().NodePrepareResources(request, metadata=metadata)
        assert {uid: r.error for uid, r in response.claims.items()} == {
            c["metadata"]["uid"]: "" for c in claims}
