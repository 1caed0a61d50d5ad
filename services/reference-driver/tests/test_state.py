"""plan_claim (pure) and DeviceState (files): validation, CDI IDs, idempotency, restart, unprepare."""

from __future__ import annotations

import json

import pytest

from reference_driver import cdi
from reference_driver.inventory import InventoryConfig, build_pool, gpu_uuid
from reference_driver.state import ClaimError, DeviceState, DriverIdentity, plan_claim

DRIVER = "gpu.draflow.example"
IDENTITY = DriverIdentity(DRIVER, "gpu")
NODE = "node-1"
UID = "11111111-2222-4333-8444-555555555555"


def node_devices(profile="plain"):
    pool = build_pool(NODE, InventoryConfig.model_validate({"profile": profile, "gpu_count": 4}))
    return {(pool.name, d.name): d for d in pool.devices}


def claim(results=None, config=None, uid=UID, allocated=True):
    obj = {"metadata": {"namespace": "ns", "name": "c", "uid": uid}, "status": {}}
    if allocated:
        obj["status"]["allocation"] = {"devices": {
            "results": results if results is not None else [
                {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-1"}],
            "config": config or [],
        }}
    return obj


def bad_interval():
    return [{"source": "FromClaim", "requests": [], "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": f"{DRIVER}/v1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Sometimes"}}}}}]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (claim(uid="other-uid"), "was replaced"),
        (claim(allocated=False), "is not allocated"),
        (claim(results=[{"request": "r", "driver": "other.example", "pool": NODE, "device": "x"}]),
         "no devices allocated by driver gpu.draflow.example"),
        (claim(results=[{"request": "r", "driver": DRIVER, "pool": "node-2", "device": "gpu-1"}]),
         "device node-2/gpu-1 is not a device of node node-1"),
        (claim(results=[{"request": "r", "driver": DRIVER, "pool": NODE, "device": "gpu-99"}]),
         "device node-1/gpu-99 is not a device"),
        (claim(config=bad_interval()), "sharing.timeSlicing.interval"),
    ],
    ids=["uid-mismatch", "not-allocated", "other-driver-only", "other-node", "unknown-device", "bad-config"],
)
def test_invalid_claims_fail_with_a_reason(obj, message):
    with pytest.raises(ClaimError, match=message) as info:
        plan_claim(obj, uid=UID, identity=IDENTITY, node_name=NODE, devices=node_devices())
    assert info.value.claim_uid == UID


def test_plan_strips_subrequests_keeps_share_id_and_renders_cdi(validate_cdi):
    results = [
        {"request": "gpus/big", "driver": DRIVER, "pool": NODE, "device": "gpu-0"},
        {"request": "shared", "driver": DRIVER, "pool": NODE, "device": "gpu-2", "shareID": "share-1",
         "consumedCapacity": {"memory": "10Gi"}},
        {"request": "other", "driver": "other.example", "pool": NODE, "device": "x"},
    ]
    plan = plan_claim(claim(results=results), uid=UID, identity=IDENTITY, node_name=NODE,
                      devices=node_devices())
    devices = plan.prepared.devices
    assert [d.request_names for d in devices] == [("gpus",), ("shared",)]
    assert [d.share_id for d in devices] == [None, "share-1"]
    assert [d.cdi_device_ids for d in devices] == [
        (f"{DRIVER}/gpu={UID}-gpu-0",), (f"{DRIVER}/gpu={UID}-gpu-2-share-1",)]
    assert validate_cdi(plan.spec) == []
    env = plan.spec["devices"][1]["containerEdits"]["env"]
    assert f"DRAFLOW_GPU_2={gpu_uuid(NODE, 2)}" in env
    assert "DRAFLOW_GPU_2_SHARE_ID=share-1" in env
    assert "DRAFLOW_GPU_2_MEMORY=10Gi" in env


def test_opaque_sharing_config_lands_in_the_cdi_env():
    config = [{"source": "FromClass", "requests": [], "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": f"{DRIVER}/v1", "kind": "GpuConfig",
        "sharing": {"strategy": "SpacePartitioning", "spacePartitioning": {"partitionCount": 3}}}}}]
    plan = plan_claim(
        claim(config=config), uid=UID, identity=IDENTITY, node_name=NODE, devices=node_devices()
    )
    env = plan.spec["devices"][0]["containerEdits"]["env"]
    assert "DRAFLOW_GPU_1_SHARING_STRATEGY=SpacePartitioning" in env
    assert "DRAFLOW_GPU_1_PARTITION_COUNT=3" in env


def new_state(tmp_path):
    return DeviceState(
        identity=IDENTITY, node_name=NODE, cdi_root=tmp_path / "cdi", state_dir=tmp_path / "state"
    )


async def test_prepare_is_idempotent_and_survives_a_restart(tmp_path):
    state = new_state(tmp_path)
    first = await state.prepare(UID, claim(), node_devices())
    spec_file = tmp_path / "cdi" / cdi.spec_file_name(DRIVER, "gpu", UID)
    assert json.loads(spec_file.read_text())["devices"][0]["name"] == f"{UID}-gpu-1"
    assert await state.prepare(UID, claim(), node_devices()) == first

    spec_file.unlink()  # lost CDI file: a repeated prepare puts it back
    restarted = new_state(tmp_path)
    assert restarted.prepared_claims[UID].devices == first
    assert await restarted.prepare(UID, claim(), node_devices()) == first
    assert spec_file.exists()


@pytest.mark.parametrize(
    "left_behind", [b"", b'{"cdiVersion": "0.6.0", "kin', b"{}"], ids=["empty", "torn", "no-kind"]
)
async def test_a_spec_file_a_power_loss_emptied_is_written_again_on_the_next_prepare(tmp_path, left_behind):
    """CDI specs are renamed into place without fsync (as the CDI library does): after a power loss the
    file may exist but be empty. A repeated prepare must not answer with devices the runtime cannot
    resolve."""
    state = new_state(tmp_path)
    first = await state.prepare(UID, claim(), node_devices())
    spec_file = tmp_path / "cdi" / cdi.spec_file_name(DRIVER, "gpu", UID)
    spec_file.write_bytes(left_behind)
    restarted = new_state(tmp_path)
    assert await restarted.prepare(UID, claim(), node_devices()) == first
    assert json.loads(spec_file.read_text())["devices"][0]["name"] == f"{UID}-gpu-1"


async def test_unprepare_removes_the_cdi_file_and_unknown_claims_succeed(tmp_path):
    state = new_state(tmp_path)
    await state.prepare(UID, claim(), node_devices())
    await state.unprepare(UID)
    assert list((tmp_path / "cdi").iterdir()) == []
    assert UID not in new_state(tmp_path).prepared_claims
    await state.unprepare(UID)
    await state.unprepare("never-seen")


async def test_a_prepared_claim_stays_prepared_when_the_inventory_shrinks(tmp_path):
    state = new_state(tmp_path)
    obj = claim(results=[{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-3"}])
    first = await state.prepare(UID, obj, node_devices())
    fewer = {k: v for k, v in node_devices().items() if k[1] != "gpu-3"}
    assert await state.prepare(UID, obj, fewer) == first
    with pytest.raises(ClaimError, match="replaced"):
        await state.prepare(UID, claim(uid="someone-else"), fewer)


OTHER = "99999999-2222-4333-8444-555555555555"


@pytest.mark.parametrize(
    ("profile", "refused"),
    [("plain", True), ("consumable", False)],
    ids=["exclusive-device-refused", "multi-allocation-device-shared"],
)
async def test_a_device_prepared_for_another_claim_is_refused_unless_it_allows_multiple_allocations(
    tmp_path, profile, refused
):
    state = new_state(tmp_path)
    devices = node_devices(profile)
    await state.prepare(UID, claim(), devices)
    second = claim(uid=OTHER)
    second["metadata"]["name"] = "c2"
    if refused:
        with pytest.raises(ClaimError, match="device node-1/gpu-1 is already prepared for claim ns/c") as err:
            await state.prepare(OTHER, second, devices)
        assert err.value.claim_uid == OTHER
        assert OTHER not in state.prepared_claims
        assert not (tmp_path / "cdi" / cdi.spec_file_name(DRIVER, "gpu", OTHER)).exists()
        await state.unprepare(UID)  # the device is free again
    await state.prepare(OTHER, second, devices)
    assert OTHER in state.prepared_claims


@pytest.mark.parametrize("admin_first", [True, False], ids=["admin-prepared-first", "admin-prepared-second"])
async def test_an_admin_access_claim_shares_a_device_prepared_for_another_claim(tmp_path, admin_first):
    """adminAccess (DRAAdminAccess): the allocator gives a device that is in use to an admin claim (and a
    device an admin claim holds to an ordinary one); the driver prepares both in either order, and the
    checkpoint remembers which device was prepared for admin access across a restart."""
    state = new_state(tmp_path)
    devices = node_devices()
    admin = claim(uid=OTHER, results=[
        {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-1", "adminAccess": True}])
    admin["metadata"]["name"] = "monitor"
    order = [(OTHER, admin), (UID, claim())] if admin_first else [(UID, claim()), (OTHER, admin)]
    for uid, obj in order:
        await state.prepare(uid, obj, devices)
    assert set(state.prepared_claims) == {UID, OTHER}
    again = new_state(tmp_path)  # a restarted driver: the checkpoint says which device is an admin one
    third = claim(uid="33333333-2222-4333-8444-555555555555")
    third["metadata"]["name"] = "c3"
    with pytest.raises(ClaimError, match="device node-1/gpu-1 is already prepared for claim ns/c "):
        await again.prepare("33333333-2222-4333-8444-555555555555", third, devices)
