"""PodGroups (GenericWorkload, DRAWorkloadResourceClaims) against the real kube-apiserver, the allocator
alone: a claim the PodGroup lists by name is allocated for the first member with the PodGroup in
``reservedFor``; the next member needs no write; a pod outside the group that uses the same claim adds
itself (the API server takes both kinds of entry in one list, merged by UID). Pod-group cycles: a gang
that cannot be placed as a whole is not placed at all (no device held) and the next gang places; a
group's claim allocated for a node the group can no longer use is given back by PodGroupPostFilter,
then allocated where the group fits, and another group takes the freed device; a gang's pods wait
untouched for their PodGroup and for ``minCount`` pods, then are placed in one go."""

from __future__ import annotations

from typing import Any

import pytest
from sa_kit import Kit, group_ref

from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIMS
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


async def test_members_share_a_claim_reserved_once_for_their_podgroup(kit: Kit) -> None:
    node, ref = await kit.group_sharing_a_claim(2)
    await kit.start()
    await kit.worker("w-0")
    assert await kit.wait_bound("w-0") == node
    claim = await kit.get(RESOURCE_CLAIMS, "shared") or {}
    assert claim["status"]["reservedFor"] == [ref]
    version = claim["metadata"]["resourceVersion"]

    await kit.worker("w-1")
    assert await kit.wait_bound("w-1") == node
    claim = await kit.get(RESOURCE_CLAIMS, "shared") or {}
    assert claim["metadata"]["resourceVersion"] == version  # nothing to write for the second member

    solo = await kit.pod("solo", {"gpu": {"resourceClaimName": "shared"}})
    assert await kit.wait_bound("solo") == node

    async def both() -> list[dict[str, Any]] | None:
        reserved = ((await kit.get(RESOURCE_CLAIMS, "shared") or {}).get("status") or {}).get("reservedFor")
        return reserved if reserved and len(reserved) == 2 else None

    reserved = await eventually(both, what="the PodGroup and the solo pod reserved")
    solo_ref = {"resource": "pods", "name": "solo", "uid": solo["metadata"]["uid"]}
    assert sorted(reserved, key=lambda r: r["uid"]) == sorted([ref, solo_ref], key=lambda r: r["uid"])


async def _allocated(kit: Kit, name: str) -> bool:
    return bool(((await kit.get(RESOURCE_CLAIMS, name) or {}).get("status") or {}).get("allocation"))


async def test_a_gang_that_cannot_be_placed_whole_holds_nothing_and_the_next_gang_places(kit: Kit) -> None:
    node = await kit.node("n", labels={"gang-test": kit.suffix})
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.pod_group("big", {"gang": {"minCount": 3}})
    await kit.pod_group("small", {"gang": {"minCount": 2}})
    await kit.start()
    pin = {"nodeSelector": {"gang-test": kit.suffix}}
    for i in range(3):  # three pods of one device each, two devices: the gang cannot start
        await kit.claim(f"big-{i}")
        await kit.pod(f"big-{i}", {"gpu": {"resourceClaimName": f"big-{i}"}},
                      schedulingGroup={"podGroupName": "big"}, **pin)
    for i in range(2):  # they fit, the gang does not
        message = await kit.wait_condition(f"big-{i}", 'pod group "')
        assert message == (f'pod group "{kit.namespace}/big" is unschedulable: minCount (3) cannot be '
                           "satisfied: 2 scheduled, 0 remaining")
    assert "0 free (2 in use)" in await kit.wait_condition("big-2", "cannot allocate")  # its own reason
    assert not [i for i in range(3) if await _allocated(kit, f"big-{i}")]  # before: two allocated, bound

    for i in range(2):
        await kit.claim(f"small-{i}")
        await kit.pod(f"small-{i}", {"gpu": {"resourceClaimName": f"small-{i}"}},
                      schedulingGroup={"podGroupName": "small"}, **pin)
    assert [await kit.wait_bound(f"small-{i}") for i in range(2)] == [node, node]
    for i in range(3):
        assert not ((await kit.get(PODS, f"big-{i}") or {}).get("spec") or {}).get("nodeName")


async def test_a_groups_claim_stuck_on_a_node_the_group_cannot_use_is_given_back(kit: Kit) -> None:
    a = await kit.node("a", labels={"pg-test": f"a-{kit.suffix}"})
    b = await kit.node("b", labels={"pg-test": f"b-{kit.suffix}"})
    for node in (a, b):
        await kit.slice(node, 1)
    await kit.device_class_()
    await kit.claim("shared")
    group = await kit.pod_group("trainers", {"basic": {}}, [{"name": "gpu", "resourceClaimName": "shared"}])
    await kit.pod_group("others", {"basic": {}})
    await kit.start()
    member = {"schedulingGroup": {"podGroupName": "trainers"}}
    await kit.pod("t-0", {"gpu": {"resourceClaimName": "shared"}},
                  nodeSelector={"pg-test": f"a-{kit.suffix}"}, **member)
    assert await kit.wait_bound("t-0") == a
    await kit.kube.delete(PODS, "t-0", kit.namespace, grace_period_seconds=0)
    # The group keeps its claim (reserved for it, on a's only device). Its next pod can only use b:
    await kit.pod("t-1", {"gpu": {"resourceClaimName": "shared"}},
                  nodeSelector={"pg-test": f"b-{kit.suffix}"}, **member)
    await kit.claim("other-0")  # another group's pod that needs a's device
    await kit.pod("o-0", {"gpu": {"resourceClaimName": "other-0"}},
                  nodeSelector={"pg-test": f"a-{kit.suffix}"}, schedulingGroup={"podGroupName": "others"})
    assert await kit.wait_bound("t-1", timeout=60) == b  # before: unschedulable for ever
    assert await kit.wait_bound("o-0", timeout=60) == a
    claim = await kit.get(RESOURCE_CLAIMS, "shared") or {}
    assert claim["status"]["reservedFor"] == [group_ref(group)]
    assert b in str(claim["status"]["allocation"]["nodeSelector"])

    async def given_back() -> str | None:
        events = await kit.kube.list(EVENTS, kit.namespace, field_selector="involvedObject.name=t-1")
        return next((e["message"] for e in events["items"] if e["reason"] == "ClaimDeallocated"), None)

    message = await eventually(given_back, what="the ClaimDeallocated Event")
    assert message == (f'pod group "{kit.namespace}/trainers" cannot be placed: deallocated ResourceClaim '
                       f'"{kit.namespace}/shared" so that it can be allocated again')


async def test_a_gang_waits_for_min_count_pods_and_its_podgroup_then_places_in_one_go(kit: Kit) -> None:
    node = await kit.node("n", labels={"gang-wait": kit.suffix})
    await kit.slice(node, 4)
    await kit.device_class_()
    await kit.start()
    pin = {"nodeSelector": {"gang-wait": kit.suffix}, "schedulingGroup": {"podGroupName": "crew"}}
    for i in range(3):
        await kit.claim(f"crew-{i}")
    await kit.pod("crew-0", {"gpu": {"resourceClaimName": "crew-0"}}, **pin)  # no PodGroup yet: waits
    await kit.pod("crew-1", {"gpu": {"resourceClaimName": "crew-1"}}, **pin)
    await kit.pod_group("crew", {"gang": {"minCount": 3}})  # two pods of three: still waits
    await kit.claim("control")
    await kit.pod("control", {"gpu": {"resourceClaimName": "control"}},
                  nodeSelector={"gang-wait": kit.suffix})  # not in the group: placed meanwhile
    assert await kit.wait_bound("control") == node
    for i in range(2):  # the allocator decided a later pod since; the gang's stayed untouched
        pod = await kit.get(PODS, f"crew-{i}") or {}
        assert not pod["spec"].get("nodeName") and not (pod.get("status") or {}).get("conditions")
        assert not await _allocated(kit, f"crew-{i}")

    await kit.pod("crew-2", {"gpu": {"resourceClaimName": "crew-2"}}, **pin)
    assert [await kit.wait_bound(f"crew-{i}") for i in range(3)] == [node] * 3
