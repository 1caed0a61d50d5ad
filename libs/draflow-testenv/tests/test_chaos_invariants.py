"""The chaos run's invariants: each holds on a healthy hand-made snapshot and names a hand-made violation."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from draflow_runtime.journal import encode_record
from draflow_testenv.chaos import checks
from draflow_testenv.chaos import claimkinds as kinds
from draflow_testenv.chaos import invariants as inv
from draflow_testenv.chaos.stack import read_node_files

NS = "draflow-chaos"
DRIVER = "gpu.draflow.example"


def _slice(node: str = "sim-0") -> dict[str, Any]:
    """One GPU of the partitionable profile: the whole device and two halves on one counter set."""
    def consumes(mem: str) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": mem}}}]

    return {"metadata": {"name": f"{node}-slice"}, "spec": {
        "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}],
        "devices": [{"name": "gpu-0", "consumesCounters": consumes("80Gi")},
                    {"name": "gpu-0-part-0", "consumesCounters": consumes("40Gi")},
                    {"name": "gpu-0-part-1", "consumesCounters": consumes("40Gi")},
                    {"name": "shared-0", "allowMultipleAllocations": True}]}}


def _claim(name: str, devices: list[str], *, node: str = "sim-0", reserved: list[str] = ()) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if devices:
        status["allocation"] = {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": d}
                                    for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
    status["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved]
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "annotations": {kinds.TRACEPARENT: f"00-{name:0>32}-{'1':0>16}-01"}},
            "spec": {}, "status": status}


def _pod(name: str, claim: str, *, node: str = "sim-0", phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": name},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
            "status": {"phase": phase}}


def _healthy() -> inv.Snapshot:
    return inv.Snapshot(
        pods=[_pod("p1", "c1"), _pod("p2", "c2")],
        claims=[_claim("c1", ["gpu-0-part-0"], reserved=["p1"]),
                _claim("c2", ["gpu-0-part-1"], reserved=["p2"])],
        slices=[_slice()],
        nodes={"sim-0": inv.NodeFiles(cdi={"uid-c1", "uid-c2"}, checkpoint={"uid-c1", "uid-c2"})},
    )


def test_a_healthy_snapshot_has_no_violation() -> None:
    assert checks.run_checks(_healthy(), checks.SETTLED) == []


def test_quantities() -> None:
    assert inv.quantity("80Gi") == 80 * 2**30
    assert inv.quantity("500m") == Decimal("0.5")
    assert inv.quantity(4) == 4
    assert inv.quantity("1k") == 1000


def test_a_device_in_two_claims_is_a_violation_unless_it_allows_it() -> None:
    snap = _healthy()
    snap.claims.append(_claim("c3", ["gpu-0-part-0"], reserved=["p1"]))
    assert inv.double_allocation(snap) == [
        f"device {DRIVER}/sim-0/gpu-0-part-0 allocated to ['{NS}/c1', '{NS}/c3']"]
    snap.claims[-1] = _claim("c3", ["shared-0"], reserved=["p1"])
    snap.claims.append(_claim("c4", ["shared-0"], reserved=["p2"]))
    assert inv.double_allocation(snap) == []


def test_a_counter_over_capacity_is_a_violation() -> None:
    snap = _healthy()
    snap.claims.append(_claim("c3", ["gpu-0"], reserved=["p1"]))  # whole GPU next to both halves
    assert inv.counters_over_capacity(snap) == [
        f"counter {DRIVER}/sim-0/gpu-0-counters/memory uses {160 * 2**30} of {80 * 2**30}"]


def test_a_bound_pod_needs_its_claims_allocated_for_its_node_and_reserved() -> None:
    snap = _healthy()
    snap.claims[0] = _claim("c1", [], reserved=[])
    snap.claims[1] = _claim("c2", ["gpu-0-part-1"], node="sim-1", reserved=["p2"])
    snap.pods.append(_pod("p3", "c3"))
    snap.claims.append(_claim("c3", ["gpu-0"], reserved=[]))
    snap.pods.append({**_pod("p4", "x"), "spec": {"nodeName": "sim-0", "resourceClaims": [
        {"name": "gpu", "resourceClaimTemplateName": "whole"}]}})
    assert inv.bound_pods_claims(snap) == [
        f"pod {NS}/p1 on sim-0: claim c1 not allocated",
        f"pod {NS}/p2 on sim-0: claim c2 allocated for sim-1",
        f"pod {NS}/p3 on sim-0: claim c3 not reserved for it",
        f"pod {NS}/p4 on sim-0: 1 claim(s) without a name",
    ]


def test_a_pod_being_deleted_or_finished_is_not_checked_for_its_claims() -> None:
    snap = _healthy()
    snap.claims[0] = _claim("c1", [], reserved=[])
    snap.pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert inv.bound_pods_claims(snap) == []


def test_an_allocated_claim_without_a_live_consumer_is_a_violation() -> None:
    snap = _healthy()
    snap.pods[1]["status"]["phase"] = "Succeeded"
    snap.claims.append(_claim("c3", ["gpu-0"], reserved=[]))
    assert inv.allocated_without_consumer(snap) == [
        f"claim {NS}/c2 allocated without a live consumer",
        f"claim {NS}/c3 allocated without a live consumer"]


def test_a_pod_not_running_after_settling_is_a_violation() -> None:
    snap = _healthy()
    snap.pods.append(_pod("p3", "c3", node="", phase="Pending"))
    assert inv.pods_not_running(snap) == [f"pod {NS}/p3 is Pending on -"]


def test_node_files_must_match_the_live_pods() -> None:
    snap = _healthy()
    snap.nodes["sim-0"] = inv.NodeFiles(cdi={"uid-c1", "uid-old"}, checkpoint={"uid-c1", "uid-c2"})
    assert inv.node_files(snap) == [
        "node sim-0: CDI files miss claims ['uid-c2']",
        "node sim-0: CDI files hold claims of no live pod ['uid-old']",
    ]
    snap.pods.pop()
    snap.nodes["sim-0"] = inv.NodeFiles(cdi={"uid-c1"}, checkpoint={"uid-c1", "uid-c2"})
    assert inv.node_files(snap) == ["node sim-0: checkpoint hold claims of no live pod ['uid-c2']"]


def test_read_node_files(tmp_path: Path) -> None:
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "draflow.example-gpu_uid-1.json").write_text("{}")
    (tmp_path / "state").mkdir()
    data = json.dumps({"preparedClaims": {"uid-1": {}, "uid-2": {}}})
    (tmp_path / "state" / "checkpoint.json").write_text(json.dumps({"checksum": 0, "data": data}))
    assert read_node_files(tmp_path) == inv.NodeFiles(cdi={"uid-1"}, checkpoint={"uid-1", "uid-2"})
    assert read_node_files(tmp_path / "missing") == inv.NodeFiles()


def test_read_node_files_replays_the_driver_checkpoint_journals(tmp_path: Path) -> None:
    """The driver's checkpoint is a snapshot (journalEpoch 3) plus the records of epochs 3 and 4."""
    (tmp_path / "state").mkdir()
    data = json.dumps({"preparedClaims": {"uid-1": {}, "uid-2": {}}, "journalEpoch": 3})
    (tmp_path / "state" / "checkpoint.json").write_text(json.dumps({"checksum": 0, "data": data}))

    def journal(epoch: int, *records: dict[str, Any]) -> None:
        raw = b"".join(encode_record(epoch, seq, json.dumps(r).encode()) for seq, r in enumerate(records, 1))
        (tmp_path / "state" / f"checkpoint.journal.{epoch % 2}").write_bytes(raw)

    journal(3, {"op": "unprepare", "uid": "uid-1"}, {"op": "prepare", "uid": "uid-3", "claim": {}})
    journal(4, {"op": "prepare", "uid": "uid-4", "claim": {}}, {"op": "unprepare", "uid": "uid-3"})
    assert read_node_files(tmp_path).checkpoint == {"uid-2", "uid-4"}


# --- the newer claim kinds: PodGroup claims, extended-resource claims, trace roots, orphans ---------------

GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g1", "uid": "uid-g1"}


def _group(name: str = "g1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "whole"}]}}


def _owned(claim: dict[str, Any], kind: str, name: str, api: str = "v1") -> dict[str, Any]:
    claim["metadata"]["ownerReferences"] = [
        {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}" if kind == "PodGroup" else name,
         "controller": True}]
    return claim


def _group_claim(name: str, devices: list[str], group: str = "g1") -> dict[str, Any]:
    claim = _owned(_claim(name, devices), "PodGroup", group, "scheduling.k8s.io/v1beta1")
    claim["metadata"]["annotations"][kinds.POD_CLAIM_ANNOTATION] = "gpu"
    claim["status"]["reservedFor"] = [{**GROUP_REF, "name": group, "uid": f"uid-{group}"}]
    return claim


def _member(name: str, claim: str, group: str = "g1") -> dict[str, Any]:
    pod = _pod(name, claim)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "whole"}]
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return pod


def _extended_pod(name: str, claim: str | None) -> dict[str, Any]:
    pod = _pod(name, "-")
    pod["spec"]["resourceClaims"] = []
    pod["spec"]["containers"] = [{"name": "main", "resources": {"limits": {"gpu.draflow.example/gpu": "1"}}}]
    if claim:
        pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": claim, "requestMappings": []}
    return pod


def _extended_claim(name: str, pod: str) -> dict[str, Any]:
    claim = _owned(_claim(name, ["gpu-0"], reserved=[pod]), "Pod", pod)
    claim["metadata"]["annotations"][kinds.EXTENDED_ANNOTATION] = "true"
    return claim


def _with_group() -> inv.Snapshot:
    """Two members of PodGroup g1 on its claim gc (whole gpu-0), reserved for the group only."""
    return inv.Snapshot(pods=[_member("m1", "gc"), _member("m2", "gc")],
                        claims=[_group_claim("gc", ["gpu-0"])], slices=[_slice()], pod_groups=[_group()],
                        nodes={"sim-0": inv.NodeFiles(cdi={"uid-gc"}, checkpoint={"uid-gc"})})


def _with_extended() -> inv.Snapshot:
    return inv.Snapshot(pods=[_extended_pod("x1", "xc")], claims=[_extended_claim("xc", "x1")],
                        slices=[_slice()], extended_names=frozenset({"gpu.draflow.example/gpu"}),
                        nodes={"sim-0": inv.NodeFiles(cdi={"uid-xc"}, checkpoint={"uid-xc"})})


def test_podgroup_and_extended_snapshots_that_hold_have_no_violation() -> None:
    assert checks.run_checks(_with_group(), checks.SETTLED) == []
    assert checks.run_checks(_with_extended(), checks.SETTLED) == []


def test_a_podgroup_claim_made_twice_or_reserved_for_its_pods_is_a_violation() -> None:
    snap = _with_group()
    snap.claims[0]["status"]["reservedFor"].append({"resource": "pods", "name": "m1", "uid": "m1"})
    snap.claims.append(_group_claim("gc2", []))
    assert kinds.pod_group_claims(snap) == [
        f"claim {NS}/gc of PodGroup g1 reserved for ['m1']",
        f"PodGroup {NS} uid uid-g1: 2 claims for its claim 'gpu'",
    ]


def test_a_podgroup_member_on_a_claim_of_its_own_is_a_violation() -> None:
    snap = _with_group()
    snap.pods[1] = _member("m2", "own")
    snap.claims.append(_owned(_claim("own", ["gpu-0-part-0"], reserved=["m2"]), "Pod", "m2"))
    assert kinds.pod_group_claims(snap) == [
        f"pod {NS}/m2 of PodGroup g1 on sim-0: its claim gpu is {NS}/own, not its group's"]


def test_a_member_needs_its_group_claim_reserved_for_the_group() -> None:
    snap = _with_group()
    snap.claims[0]["status"]["reservedFor"] = []
    assert inv.bound_pods_claims(snap) == [f"pod {NS}/m1 on sim-0: claim gc not reserved for it",
                                           f"pod {NS}/m2 on sim-0: claim gc not reserved for it"]


def test_a_group_claim_is_consumed_while_its_group_exists() -> None:
    snap = _with_group()
    snap.pods.clear()  # the members ended: the group may run more, its claim stays allocated for it
    assert inv.allocated_without_consumer(snap) == []
    snap.pod_groups.clear()
    assert inv.allocated_without_consumer(snap) == [f"claim {NS}/gc allocated without a live consumer"]


def test_an_extended_claim_missing_foreign_or_doubled_is_a_violation() -> None:
    snap = _with_extended()
    snap.pods.append(_extended_pod("x2", None))
    snap.pods.append(_extended_pod("x3", "xc"))
    snap.claims.append(_extended_claim("xc-spare", "x1"))
    assert kinds.extended_claims(snap) == [
        f"pod {NS}/x1: extended claims ['{NS}/xc-spare'] besides xc",
        f"pod {NS}/x2 on sim-0: asks for ['gpu.draflow.example/gpu'] without an extended claim",
        f"pod {NS}/x3: extended claim xc is not its own",
    ]


def test_a_bound_pods_extended_claim_must_be_allocated_reserved_and_prepared() -> None:
    snap = _with_extended()
    snap.claims[0]["status"]["reservedFor"] = []
    snap.nodes["sim-0"] = inv.NodeFiles()
    assert inv.bound_pods_claims(snap) == [f"pod {NS}/x1 on sim-0: claim xc not reserved for it"]
    assert inv.node_files(snap) == ["node sim-0: CDI files miss claims ['uid-xc']",
                                    "node sim-0: checkpoint miss claims ['uid-xc']"]


def test_a_claim_left_behind_by_its_pod_or_podgroup_is_a_violation() -> None:
    snap = _with_extended()
    snap.pods[0]["status"]["phase"] = "Succeeded"
    snap.claims.append(_owned(_claim("gone", []), "Pod", "p9"))
    snap.claims.append(_group_claim("gc", []))
    snap.claims.append(_claim("users", []))  # no owner: the user's to delete
    assert kinds.orphan_claims(snap) == [
        f"claim {NS}/xc left behind by pod x1",
        f"claim {NS}/gone left behind by pod p9",
        f"claim {NS}/gc left behind by PodGroup g1",
    ]


def test_a_claim_without_a_trace_root_after_settling_is_a_violation() -> None:
    snap = _healthy()
    del snap.claims[1]["metadata"]["annotations"][kinds.TRACEPARENT]
    assert kinds.trace_roots(snap) == [f"claim {NS}/c2 has no {kinds.TRACEPARENT}"]


def test_a_trace_root_is_written_once_and_never_changed_or_removed() -> None:
    history = kinds.History()
    snap = _healthy()
    snap.claims.append(_claim("late", []))
    del snap.claims[-1]["metadata"]["annotations"][kinds.TRACEPARENT]
    assert history.observe(snap) == []  # not written yet: fine while running (trace_roots checks it settled)
    root = f"00-{'f':0>32}-{'1':0>16}-01"
    snap.claims[-1]["metadata"]["annotations"][kinds.TRACEPARENT] = root
    assert history.observe(snap) == []
    snap.claims[0]["metadata"]["annotations"][kinds.TRACEPARENT] = root
    del snap.claims[-1]["metadata"]["annotations"][kinds.TRACEPARENT]
    assert history.observe(snap) == [
        f"claim {NS}/c1: trace root 00-{'c1':0>32}-{'1':0>16}-01 became {root}",
        f"claim {NS}/late: trace root {root} became None",
    ]


def test_a_podgroup_claim_is_allocated_once() -> None:
    history = kinds.History()
    snap = _with_group()
    assert history.observe(snap) == []
    snap.claims[0] = _group_claim("gc", [])  # deallocated (the group went): not a second allocation
    assert history.observe(snap) == []
    snap.claims[0] = _group_claim("gc", ["gpu-0-part-1"])
    assert history.observe(snap) == [
        f"claim {NS}/gc of a PodGroup: allocated [('{DRIVER}', 'sim-0', 'gpu-0')], "
        f"then [('{DRIVER}', 'sim-0', 'gpu-0-part-1')]"]


def test_a_check_that_raises_is_a_violation_not_silence() -> None:
    """Before: the runner ran the continuous checks inside the snapshot's ``suppress(Exception)``: a check
    tripping over an object it did not expect stopped checking for the rest of the run, silently."""
    def group_spec_names(snap: inv.Snapshot) -> list[str]:
        return [e["name"] for g in snap.pod_groups for e in g["spec"]["resourceClaims"]]

    snap = _with_group()
    snap.pod_groups.append({"metadata": {"name": "g2", "namespace": NS, "uid": "uid-g2"}})  # no spec
    assert checks.run_checks(snap, [group_spec_names, inv.pods_not_running]) == [
        "group_spec_names: raised KeyError: 'spec'"]


def test_a_pod_claim_or_podgroup_still_being_deleted_after_settling_is_a_violation() -> None:
    snap = _with_group()
    when = "2026-11-24T00:00:00Z"
    snap.pod_groups[0]["metadata"] |= {"deletionTimestamp": when,
                                       "finalizers": ["scheduling.k8s.io/podgroup-protection"]}
    snap.pods[0]["metadata"]["deletionTimestamp"] = when
    assert kinds.stuck_deleting(snap) == [
        f"pod {NS}/m1 deleted at {when} is still there (finalizers [])",
        f"PodGroup {NS}/g1 deleted at {when} is still there "
        "(finalizers ['scheduling.k8s.io/podgroup-protection'])",
    ]
