"""draflow's node side under upstream's control plane, as an upstream DRA driver would be used.

kube-scheduler v1.37.1 (its DynamicResources plugin) and kube-controller-manager v1.37.1 (resourceclaim,
device-taint-eviction and garbage-collector controllers) against the test environment's API server, with
draflow's reference-driver, kubelet-dra-shim (simulated kubelet) and slice-publisher for three simulated
nodes, and NO draflow claim-controller or structured-allocator. The demo workload (``deploy/demo``: template
claims, a shared claim, CEL selectors, firstAvailable, partitions, extended resources through ``limits``) and
what it lacks (a ``matchAttribute`` constraint, an admin-access claim, a DeviceTaintRule) run with the
default scheduler: every pod the demo expects to run is Running with exactly the devices kube-scheduler
allocated prepared and handed to its container, a NoExecute DeviceTaintRule evicts the pod using the
tainted device, deleting the pods unprepares everything and the controllers deallocate and delete, and
neither upstream component logs an error about draflow's objects.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from upstream_kit import (
    ADMIN,
    ADMIN_ACCESS_LABEL,
    PAIRED,
    UNFIT,
    cdi_spec,
    claims_of,
    demo_running,
    expected_running,
    items,
    namespaced_demo,
    other_node_lookup,
    prepared_problems,
)

from draflow_runtime.dra import claim_names, claim_results
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.fleetflow import DRIVER, ServiceFlow
from draflow_testenv.upstream import dra_log_errors, start_control_plane

pytestmark = pytest.mark.integration

WITHIN = 240.0  # the whole demo on a shared 2-core machine


def _devices(claim: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((r["request"], r["device"]) for r in claim_results(claim))


@pytest.mark.timeout(900)
async def test_node_side_runs_the_demo_under_upstream_scheduler_and_controller_manager(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("up")
    await kube.patch(NAMESPACES, ns, {"metadata": {"labels": {ADMIN_ACCESS_LABEL: "true"}}})
    suffix = ns.rpartition("-")[2]
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=3, gpus=8)
    fleet = Path(tempfile.mkdtemp(prefix="dup-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    objects = namespaced_demo(ns, suffix, flow.nodes)
    rule = f"{suffix}-broken-gpu"
    try:
        await flow.start(run_service, fleet, control_plane=False,
                         extra={"reference-driver": ["--profile", "partitionable"]})
        await flow.wait_nodes_ready()
        plane = await start_control_plane(testenv, run_service)
        pods = await demo_running(flow, objects, WITHIN)
        expected = expected_running(objects)
        claims = await claims_of(kube, ns)
        published = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                     for s in items(await kube.list(RESOURCE_SLICES))
                     for d in s["spec"].get("devices") or ()}
        problems = [p for name in expected for p in prepared_problems(
            pods[name], claims, flow.cdi_root(pods[name]["spec"]["nodeName"]))]
        assert not problems, problems

        def claim_of(pod: str) -> dict[str, Any]:
            (name,) = claim_names(pods[pod], extended=True)
            return claims[name]

        # What kube-scheduler allocated is what the demo asks for.
        shared = claims["shared-gpu"]
        assert {r["name"] for r in shared["status"]["reservedFor"]} == {"shared-0", "shared-1", "shared-2"}
        assert len({pods[f"shared-{i}"]["spec"]["nodeName"] for i in range(3)}) == 1
        assert [r for r, _ in _devices(claim_of("trainer-large"))] == ["gpus", "gpus"]
        assert [r for r, _ in _devices(claim_of("flexible"))] == ["gpu/one"]
        assert len(_devices(claim_of("legacy-gpus"))) == 2
        assert all("-part-" in d for _, d in _devices(claim_of("notebook-0")))
        paired = _devices(claim_of(PAIRED))
        assert len(paired) == 2 and len({d.rpartition("-part-")[0] for _, d in paired}) == 1, paired
        mixed = _devices(claim_of("mixed"))
        assert [r for r, _ in mixed] == ["part", "whole"], mixed
        assert mixed[0][1].rpartition("-part-")[0] != mixed[1][1], mixed  # never the same GPU
        assert len(_devices(claim_of("versioned"))) == 1
        (admin,) = claim_results(claim_of(ADMIN))
        assert admin.get("adminAccess") is True, admin
        unfit = pods[UNFIT]
        assert not unfit["spec"].get("nodeName")
        assert any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in (unfit.get("status") or {}).get("conditions") or ()), unfit.get("status")

        # A NoExecute DeviceTaintRule on inference-0's device and one on the shared claim's device:
        # kube-controller-manager evicts the pods, the shim unprepares their claims once the last pod is
        # gone (the CDI specs go), the generated claim is deleted and the shared one deallocated.
        victims = {"inference-0": ("inference-0",), "shared-gpu": ("shared-0", "shared-1", "shared-2")}
        for i, owner in enumerate(victims):
            claim = claims["shared-gpu"] if owner == "shared-gpu" else claim_of(owner)
            (result,) = claim_results(claim)
            await kube.create(DEVICE_TAINT_RULES, {
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                "metadata": {"name": f"{rule}-{i}"},
                "spec": {"deviceSelector": {"driver": DRIVER, "pool": result["pool"],
                                            "device": result["device"]},
                         "taint": {"key": "draflow.example/broken", "effect": "NoExecute"}}})

        async def evicted() -> bool:
            left = {p["metadata"]["name"] for p in items(await kube.list(PODS, namespace=ns))}
            return not left & {p for users in victims.values() for p in users}

        await flow.until(evicted, "the pods of the tainted devices evicted")
        await flow.wait_claim_gone(claim_of("inference-0")["metadata"]["name"],
                                   "the evicted pod's claim deleted")

        async def shared_released() -> bool:
            shared = await kube.get(RESOURCE_CLAIMS, "shared-gpu", namespace=ns)
            return not (shared.get("status") or {}).get("allocation")

        await flow.until(shared_released, "the shared claim deallocated after its last pod was evicted")
        for owner, users in victims.items():
            claim = claims["shared-gpu"] if owner == "shared-gpu" else claim_of(owner)
            node = pods[users[0]]["spec"]["nodeName"]
            assert cdi_spec(flow.cdi_root(node), claim["metadata"]["uid"]) is None, owner

        # Deleting every pod unprepares every claim; generated claims are deleted, the user claims are
        # deallocated.
        await kube.delete_collection(PODS, namespace=ns)

        async def cleaned() -> dict[str, dict[str, Any]] | None:
            if items(await kube.list(PODS, namespace=ns)):
                return None
            left = await claims_of(kube, ns)
            if set(left) != {"shared-gpu", "too-big", "monitor-gpu"}:
                return None
            return None if any((c.get("status") or {}).get("allocation") for c in left.values()) else left

        await flow.until(cleaned, "every pod gone, generated claims deleted, user claims deallocated",
                         within=WITHIN)
        specs = sorted(p.name for n in flow.nodes for p in flow.cdi_root(n).glob("*.json"))
        assert specs == [], specs

        # Neither upstream component had anything to say against draflow's slices, claims or pods.
        for proc in plane.processes.values():
            errors = [e for e in dra_log_errors(proc.log_path, ns) if not other_node_lookup(e, published)]
            assert not errors, f"{proc.name} logged DRA errors:\n" + "\n".join(errors[:20])
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
        for i in range(2):
            with contextlib.suppress(NotFound):
                await kube.delete(DEVICE_TAINT_RULES, f"{rule}-{i}")
        for obj in objects:
            if obj["kind"] == "DeviceClass":
                with contextlib.suppress(NotFound):
                    await kube.delete(DEVICE_CLASSES, obj["metadata"]["name"])
