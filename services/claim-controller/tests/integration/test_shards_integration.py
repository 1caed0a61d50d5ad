"""Two real ``claim-controller`` processes with ``--shards`` share the pods; one is killed mid-stream.

The guarantees are those of one replica: every pod gets exactly its claims (never two for one pod claim),
no pod is forgotten when a replica dies with work in flight (the survivor takes its shards over once their
Leases expire and reconciles everything in them), and both replicas did part of the work. Like every
test here, once as the admin and once with only the RBAC of deploy/kustomize/base/claim-controller.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cc_kit import DRIVER, Kit, eventually, http_get, metric, pod, template
from test_taint_eviction_integration import TAINT, cluster_object, eviction_events, running_on, terminating

from claim_controller.context import Hooks
from claim_controller.leasecheck import ROLE, LeaseAccessDenied, check_lease_access
from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION
from claim_controller.settings import Settings
from claim_controller.sharding import pod_shard_key
from draflow_runtime.kube import (
    LEASES,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from draflow_runtime.shards import shard_of
from draflow_testenv.environment import Environment
from draflow_testenv.servers import free_port
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

SHARDS = 4
POD_CLAIMS = ("gpu", "nic")
CREATED = "draflow_claim_controller_claims_created_total"


def argv(kit: Kit, testenv: Environment, port: int, identity: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "claim-controller"),
        "--shards", str(SHARDS), "--leader-election-namespace", kit.namespace,
        "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5",
        "--namespace", kit.namespace, "--http-port", str(port), "--http-host", "127.0.0.1",
        "--nats-url", testenv.nats_url, "--identity", identity,
    ]


async def create_pods(kit: Kit, names: list[str]) -> None:
    claims = {c: {"resourceClaimTemplateName": "t"} for c in POD_CLAIMS}
    await asyncio.gather(*(kit.create(PODS, pod(n, claims)) for n in names))


async def shard_holders(kit: Kit) -> dict[int, str]:
    holders = {}
    for shard in range(SHARDS):
        lease = await kit.get(LEASES, f"claim-controller-shard-{shard}")
        holders[shard] = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
    return holders


async def unrecorded(kit: Kit, names: list[str]) -> list[str]:
    pods = {p["metadata"]["name"]: p for p in (await kit.kube.list(PODS, kit.namespace))["items"]}
    missing = []
    for name in names:
        statuses = (pods.get(name) or {}).get("status", {}).get("resourceClaimStatuses") or []
        if {s["name"] for s in statuses if s.get("resourceClaimName")} != set(POD_CLAIMS):
            missing.append(name)
    return missing


def check_exactly_the_claims(pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> None:
    per_pod_claim = Counter(
        (ref["uid"], c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"])
        for c in claims for ref in c["metadata"].get("ownerReferences") or () if ref.get("controller")
    )
    duplicates = {k: n for k, n in per_pod_claim.items() if n > 1}
    assert duplicates == {}, f"two claims for one pod claim: {duplicates}"
    names = {c["metadata"]["name"] for c in claims}
    for p in pods:
        recorded = {s["name"]: s["resourceClaimName"] for s in p["status"]["resourceClaimStatuses"]}
        assert set(recorded) == set(POD_CLAIMS), p["metadata"]["name"]
        assert set(recorded.values()) <= names, p["metadata"]["name"]
        for pod_claim in POD_CLAIMS:
            assert per_pod_claim[(p["metadata"]["uid"], pod_claim)] == 1
    assert len(claims) == len(pods) * len(POD_CLAIMS)


async def test_two_replicas_share_the_pods_and_one_survives_the_other_being_killed(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    ports = {"a": free_port(), "b": free_port()}
    replicas = {name: await run_service(argv(kit, testenv, port, f"replica-{name}"),
                                        kubeconfig=kit.identity.kubeconfig, name=f"cc-shard-{name}")
                for name, port in ports.items()}

    async def split() -> dict[int, str] | None:
        holders = await shard_holders(kit)
        return holders if set(holders.values()) == {"replica-a", "replica-b"} else None
    await eventually(split, timeout=60, what="both replicas hold shards")

    first = [f"p-{i:03d}" for i in range(40)]
    await create_pods(kit, first)

    async def all_recorded(names: list[str]) -> bool:
        return not await unrecorded(kit, names)
    await eventually(lambda: all_recorded(first), timeout=60, what="claims of the first pods")
    created = {name: await metric(port, CREATED) or 0.0 for name, port in ports.items()}
    assert created["a"] > 0 and created["b"] > 0, f"one replica did all the work: {created}"
    assert sum(created.values()) == len(first) * len(POD_CLAIMS)

    second = [f"q-{i:03d}" for i in range(40)]
    creating = asyncio.create_task(create_pods(kit, second))
    await asyncio.sleep(0)  # the first creates are on their way
    await replicas["a"].kill()  # SIGKILL mid-stream: no Lease released, reconciles cut off anywhere
    await creating

    async def b_holds_all() -> bool:
        return set((await shard_holders(kit)).values()) == {"replica-b"}
    await eventually(b_holds_all, timeout=60, what="replica-b takes over every shard")
    await eventually(lambda: all_recorded(first + second), timeout=90, what="claims of every pod")

    pods = (await kit.kube.list(PODS, kit.namespace))["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(first + second)
    check_exactly_the_claims(pods, await kit.claims())
    assert (await http_get(f"http://127.0.0.1:{ports['b']}/readyz"))[0] == 200


async def test_a_claim_the_previous_holder_just_created_is_found_not_made_again(kit: Kit) -> None:
    """The replica that died created a pod's claim but did not record it; the new holder's informer has
    not shown that claim yet (here: its claim watch is stopped). Taking the shard over reads the claims
    live first, so the claim is recorded, not created a second time."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    controller = await kit.start_controller(shards=SHARDS)
    p = await kit.create(PODS, pod("app", {"gpu": {"resourceClaimTemplateName": "t"}}))
    await eventually(lambda: controller.pods.get(f"{kit.namespace}/app") is not None, what="pod cached")
    await controller.claims.stop()  # this replica's view of claims lags from here on
    orphan = await kit.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": "app-gpu-", "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "app",
                                          "uid": p["metadata"]["uid"], "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": template("t")["spec"]["spec"],
    })

    await controller.shard_acquired(shard_of(pod_shard_key(kit.namespace, "app"), SHARDS))

    async def recorded() -> str | None:
        statuses = ((await kit.get(PODS, "app")) or {}).get("status", {}).get("resourceClaimStatuses")
        return statuses[0]["resourceClaimName"] if statuses else None
    assert await eventually(recorded, what="claim recorded") == orphan["metadata"]["name"]
    owned = [c for c in await kit.claims()
             if any(r["uid"] == p["metadata"]["uid"] for r in c["metadata"].get("ownerReferences") or ())]
    assert [c["metadata"]["name"] for c in owned] == [orphan["metadata"]["name"]]


async def test_only_the_holder_of_shard_0_evicts_and_stops_when_it_gives_it_up(kit: Kit) -> None:
    """Device-taint eviction is one unit of work: nobody evicts while shard 0 has no holder, its holder
    evicts once (one Event), and giving the shard up stops the eviction runner."""
    node = f"node-{kit.namespace}"
    holder = await kit.start_controller(shards=2)
    other = await kit.start_controller(shards=2)
    await other.shard_acquired(1)
    await running_on(kit, "victim", node, "gpu-0")
    tainted = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": f"slice-{kit.namespace}"},
               "spec": {"driver": DRIVER, "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-0", "taints": [TAINT]}]}}
    async with cluster_object(kit, RESOURCE_SLICES, tainted):
        async def untouched() -> bool:
            return await terminating(kit, "victim") is None
        await consistently(untouched, 1.0, "no eviction while nobody holds shard 0")

        await holder.shard_acquired(0)
        await eventually(lambda: terminating(kit, "victim"), what="the holder of shard 0 evicts")
        assert await eviction_events(kit, "victim") == ["Marking for deletion"]
        assert other._eviction_task is None

        await holder.shard_lost(0)
        assert holder._eviction_task is None and 0 not in holder.held


async def test_a_shard_count_beyond_the_rbac_stops_at_start_up_naming_the_role(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    """The Role names the Leases of 4 shards: with the repository's RBAC, ``--shards 8`` stops the
    process at start-up with an error naming the Leases it may not use and the Role to extend (instead of
    shards 4..7 that nobody can ever hold). The admin may use every Lease and runs all 8 shards."""
    settings = Settings(shards=SHARDS, leader_election_namespace=kit.namespace)
    await check_lease_access(kit.identity.kube, settings)  # what deploy/kustomize configures: allowed
    eight = settings.model_copy(update={"shards": 8})
    if kit.identity.is_admin:
        await check_lease_access(kit.identity.kube, eight)
    else:
        with pytest.raises(LeaseAccessDenied) as denied:
            await check_lease_access(kit.identity.kube, eight)
        assert denied.value.denied == [*(f"claim-controller-shard-{i}" for i in range(4, 8)),
                                       *(f"claim-controller-member-{i}" for i in range(4, 8))]
        assert ROLE in str(denied.value) and kit.namespace in str(denied.value)

    port = free_port()
    args = argv(kit, testenv, port, "replica-8")
    args[args.index("--shards") + 1] = "8"
    proc = await run_service(args, kubeconfig=kit.identity.kubeconfig, name="cc-shards-8")
    if kit.identity.is_admin:
        async def holds_shard_7() -> bool:
            lease = await kit.get(LEASES, "claim-controller-shard-7")
            return ((lease or {}).get("spec") or {}).get("holderIdentity") == "replica-8"
        await eventually(holds_shard_7, timeout=60, what="the admin replica holds shard 7")
        return
    await eventually(lambda: not proc.running, timeout=60, what="the replica stops at start-up")
    assert proc.returncode != 0
    log = proc.log_path.read_text()
    assert "claim-controller-shard-7" in log and ROLE in log


async def test_a_podgroup_claim_the_previous_holder_just_created_is_found_not_made_again(kit: Kit) -> None:
    """The same for a PodGroup's claim (DRAWorkloadResourceClaims): the replica that died created the
    group's claim but did not record it in the PodGroup status; the new holder's claim informer has not
    shown it. Taking the group's shard over finds it (live list, owner UID of the PodGroup), records it
    in the group's and the member's status and makes no second one."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    controller = await kit.start_controller(shards=SHARDS)
    group = await kit.create(POD_GROUPS, {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "crew"},
        "spec": {"schedulingPolicy": {"basic": {}},
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}})
    body = pod("crew-0", {"gpu": {"resourceClaimTemplateName": "t"}})
    body["spec"]["schedulingGroup"] = {"podGroupName": "crew"}
    await kit.create(PODS, body)
    groups = controller.pod_groups
    assert groups is not None
    await eventually(lambda: groups.get(f"{kit.namespace}/crew") is not None, what="group cached")
    await controller.claims.stop()  # this replica's view of claims lags from here on
    orphan = await kit.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": "crew-gpu-", "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                     "ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                          "name": "crew", "uid": group["metadata"]["uid"],
                                          "controller": True}]},
        "spec": template("t")["spec"]["spec"],
    })
    name = orphan["metadata"]["name"]
    for shard in sorted({shard_of(pod_shard_key(kit.namespace, n), SHARDS) for n in ("crew", "crew-0")}):
        await controller.shard_acquired(shard)

    async def recorded(res: Any, obj: str) -> str | None:
        statuses = ((await kit.get(res, obj)) or {}).get("status", {}).get("resourceClaimStatuses")
        return statuses[0].get("resourceClaimName") if statuses else None
    assert await eventually(lambda: recorded(POD_GROUPS, "crew"), what="group claim recorded") == name
    assert await eventually(lambda: recorded(PODS, "crew-0"), what="member claim recorded") == name
    owned = [c["metadata"]["name"] for c in await kit.claims()
             if any(r["uid"] == group["metadata"]["uid"] for r in c["metadata"].get("ownerReferences") or ())]
    assert owned == [name]


async def test_a_shard_lost_between_creating_a_claim_and_recording_it_leaves_one_claim(kit: Kit) -> None:
    """The Lease of a shard runs out mid-reconcile: replica A has created a pod's claim and is about to
    write the pod status (the test seam blocks it there) when it loses the shard. Giving the shard up
    cancels that reconcile and waits for it; replica B takes the shard and records A's claim — one claim,
    recorded once, and A, let go afterwards, writes nothing more."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    created, release = asyncio.Event(), asyncio.Event()

    async def stall(pod_obj: dict[str, Any], claim: dict[str, Any]) -> None:
        created.set()
        await release.wait()

    a = await kit.start_controller(shards=SHARDS, hooks=Hooks(after_claim_create=stall))
    b = await kit.start_controller(shards=SHARDS)
    shard = shard_of(pod_shard_key(kit.namespace, "app"), SHARDS)
    await a.shard_acquired(shard)
    await kit.create(PODS, pod("app", {"gpu": {"resourceClaimTemplateName": "t"}}))
    await eventually(created.is_set, what="A created the claim and stalls before the pod status")

    await asyncio.wait_for(a.shard_lost(shard), 30)  # cancels the stalled reconcile, waits for it
    assert shard not in a.held
    await b.shard_acquired(shard)

    async def recorded() -> str | None:
        statuses = ((await kit.get(PODS, "app")) or {}).get("status", {}).get("resourceClaimStatuses")
        return statuses[0]["resourceClaimName"] if statuses else None
    name = await eventually(recorded, what="B recorded the claim")
    release.set()
    uid = ((await kit.get(PODS, "app")) or {})["metadata"]["uid"]

    async def one_claim() -> bool:
        owned = [c["metadata"]["name"] for c in await kit.claims()
                 if any(r["uid"] == uid for r in c["metadata"].get("ownerReferences") or ())]
        return owned == [name]
    await consistently(one_claim, 2.0, "one claim for the pod, the one recorded")
