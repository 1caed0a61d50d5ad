"""Claims bound to a PodGroup (DRAWorkloadResourceClaims) against the real kube-apiserver, the allocator
alone: a claim the PodGroup lists by name is allocated for the first member with the PodGroup in
``reservedFor``; the next member needs no write; a pod outside the group that uses the same claim adds
itself (the API server takes both kinds of entry in one list, merged by UID)."""

from __future__ import annotations

from typing import Any

import pytest
from sa_kit import Kit

from draflow_runtime.kube import POD_GROUPS, RESOURCE_CLAIMS
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


async def test_members_share_a_claim_reserved_once_for_their_podgroup(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.claim("shared")
    group = await kit.kube.create(POD_GROUPS, {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "workers"},
        "spec": {"schedulingPolicy": {"basic": {}},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}}, kit.namespace)
    group_ref = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "workers",
                 "uid": group["metadata"]["uid"]}
    await kit.start()
    member = {"schedulingGroup": {"podGroupName": "workers"}}
    await kit.pod("w-0", {"gpu": {"resourceClaimName": "shared"}}, **member)
    assert await kit.wait_bound("w-0") == node
    claim = await kit.get(RESOURCE_CLAIMS, "shared") or {}
    assert claim["status"]["reservedFor"] == [group_ref]
    version = claim["metadata"]["resourceVersion"]

    await kit.pod("w-1", {"gpu": {"resourceClaimName": "shared"}}, **member)
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
    assert sorted(reserved, key=lambda r: r["uid"]) == sorted([group_ref, solo_ref], key=lambda r: r["uid"])
