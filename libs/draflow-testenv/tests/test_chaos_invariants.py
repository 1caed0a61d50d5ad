"""The chaos run's invariants: each holds on a healthy hand-made snapshot and names a hand-made violation."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

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
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": {}, "status": status}


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
    assert inv.run_checks(_healthy(), inv.SETTLED) == []


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
