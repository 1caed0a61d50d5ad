"""An upstream-style Go DRA driver against draflow: hack/go-dra-driver, written on
``k8s.io/dynamic-resource-allocation/kubeletplugin`` v0.37.1 as a third-party vendor writes one, in place of
draflow's reference-driver. It publishes its own ResourceSlices (upstream's resourceslice controller),
registers with kubelet-dra-shim through the registration socket and serves DRA v1 over gRPC on unix
sockets. claim-controller, structured-allocator, kubelet-dra-shim and slice-publisher (which must leave a
self-publishing driver's slices alone) are draflow's, as processes against the real apiserver and NATS.

What the driver saw comes from its journal (``--journal``, JSON lines written by the driver process): the
registration status the shim reported with ``NotifyRegistrationStatus`` (the helper's
``RegistrationStatus``), each prepare with the claim, its request names and the CDI IDs it returned, and
each unprepare.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from go_driver_kit import go_api_check, journal, start_driver

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    DEVICE_TAINT_RULES,
    EVENTS,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_POOL_STATUS_REQUESTS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.fleetflow import DRIVER, ServiceFlow
from slice_publisher.taints import DRIVER_UNAVAILABLE_KEY

pytestmark = pytest.mark.integration

CDI_ANNOTATION = "draflow.dev/cdi-devices"
FAIL_PREPARE = "go-dra.draflow.example/fail-prepare"  # the Go driver fails the claim's prepare with this


async def status_of(kube: KubeClient, resource: Any, name: str) -> Any:
    return (await kube.get(resource, name)).get("status")


@pytest.mark.timeout(600)
async def test_go_kubeletplugin_driver_registers_prepares_and_unprepares_through_the_shim(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("gd")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=1)
    (node,) = flow.nodes
    fleet = Path(tempfile.mkdtemp(prefix="dgd-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    log = fleet / node / "go-driver.jsonl"
    rule, pools = f"{flow.prefix}rule", f"{flow.prefix}pools"
    try:
        await flow.start(run_service, fleet, reference_driver=False)
        driver = await start_driver(run_service, fleet, node, "--slices", "2")
        flow.procs.append(driver)
        # The driver's own slices (upstream's resourceslice controller: one pool in two slices, named
        # and counted its way) make the node usable.
        await flow.wait_nodes_ready()
        own = (await kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}"))["items"]
        assert sorted((s["spec"]["pool"]["resourceSliceCount"], len(s["spec"]["devices"])) for s in own) == [
            (2, 2), (2, 2)], own
        # The shim told the driver's registration server that it is registered.
        regs = await flow.until(lambda: journal(log, "registration"), "the driver's registration status")
        assert regs[-1]["registered"] is True and not regs[-1].get("error"), regs

        await flow.create_objects()
        await flow.create_pod("go-0")
        pod = await flow.wait_running("go-0")
        claim = await flow.claim_of(pod)
        uid = claim["metadata"]["uid"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"], r["request"]) for r in results] == [(DRIVER, node, "gpu")], results

        # NodePrepareResources reached the Go driver with this claim and its request; the CDI IDs it
        # returned are what the simulated kubelet hands the container.
        prepares = [e for e in journal(log, "prepare") if e["uid"] == uid]
        assert prepares, journal(log, "prepare")
        seen = prepares[-1]
        assert (seen["namespace"], seen["name"]) == (ns, claim["metadata"]["name"])
        assert [(d["request"], d["pool"], d["device"]) for d in seen["devices"]] == [
            ("gpu", node, results[0]["device"])]
        cdi_ids = [i for d in seen["devices"] for i in d["cdiIDs"]]
        assert json.loads(pod["metadata"]["annotations"][CDI_ANNOTATION]) == {"main": cdi_ids}
        spec_file = fleet / node / "cdi" / f"{DRIVER}-{uid}.json"
        assert spec_file.exists()

        # The driver's health service (the helper's v1 DRAResourceHealth) reaches the pod's status.
        async def healthy() -> list[Any]:
            got = await kube.get(PODS, "go-0", namespace=ns)
            statuses = (got.get("status") or {}).get("containerStatuses") or [{}]
            resources = [r for s in statuses[0].get("allocatedResourcesStatus") or () for r in s["resources"]]
            return [r for r in resources if r.get("health") == "Healthy" and r["resourceID"] in cdi_ids]

        await flow.until(healthy, "the Go driver's device health in the pod status")

        # The Go driver's per-claim prepare error reaches the user as an Event on the pod (the shim's), and
        # a claim nothing can satisfy gets the allocator's FailedScheduling Event; once the driver stops
        # failing the claim, its pod runs.
        await flow.create_claim("failing")
        fail = {"metadata": {"annotations": {FAIL_PREPARE: "gpu on fire"}}}
        await kube.patch(RESOURCE_CLAIMS, "failing", fail, namespace=ns)
        await flow.create_pod("go-fail", claim="failing")
        await kube.create(RESOURCE_CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "too-many"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": flow.device_class, "allocationMode": "ExactCount", "count": 5}}]}},
        }, namespace=ns)
        await flow.create_pod("go-big", claim="too-many")

        async def warned() -> bool:
            events = (await kube.list(EVENTS, namespace=ns))["items"]
            seen = {(e["involvedObject"]["name"], e["reason"]) for e in events if e["type"] == "Warning"}
            prepare = [e for e in events if e["involvedObject"]["name"] == "go-fail"]
            return {("go-fail", "FailedPrepareDynamicResources"), ("go-big", "FailedScheduling")} <= seen \
                and any("gpu on fire" in e["message"] for e in prepare)

        await flow.until(warned, "the Warning Events of a failed prepare and of an unschedulable pod")
        assert [e["name"] for e in journal(log, "prepare-failed")][:1] == ["failing"]

        # A Go client reads what draflow wrote: strict decoding and upstream's validation find nothing.
        await kube.create(DEVICE_TAINT_RULES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": rule},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": node, "device": "gpu-3"},
                     "taint": {"key": "example.com/check", "value": "go", "effect": "None"}}})
        await kube.create(RESOURCE_POOL_STATUS_REQUESTS, {
            "apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest",
            "metadata": {"name": pools}, "spec": {"driver": DRIVER, "poolName": node}})
        await flow.until(lambda: status_of(kube, DEVICE_TAINT_RULES, rule), "the rule's status")
        await flow.until(lambda: status_of(kube, RESOURCE_POOL_STATUS_REQUESTS, pools), "the answer")
        report = await go_api_check(testenv, flow)
        assert report["problems"] == [], report["problems"]
        assert report["unserved"] == [], report
        for kind in ("ResourceClaim", "Pod", "Event", "Lease", "ResourceSlice", "DeviceTaintRule",
                     "ResourcePoolStatusRequest"):
            assert report["checked"].get(kind), report["checked"]

        await kube.patch(RESOURCE_CLAIMS, "failing", {"metadata": {"annotations": {FAIL_PREPARE: None}}},
                         namespace=ns)
        await flow.wait_running("go-fail")

        # Deleting the pod unprepares the claim in the driver, then it is deallocated and deleted.
        await kube.delete(PODS, "go-0", namespace=ns)
        await flow.wait_claim_gone(claim["metadata"]["name"], "the generated claim deleted")
        unprepares = [e for e in journal(log, "unprepare") if e["uid"] == uid]
        assert [(e["namespace"], e["name"]) for e in unprepares] == [(ns, claim["metadata"]["name"])]
        assert not spec_file.exists()

        # A restarted driver registers again (a new socket) and serves the next pod.
        flow.procs.remove(driver)
        await driver.stop()
        registrations = len(journal(log, "registration"))
        driver = await testenv.restart_service(driver)
        flow.procs.append(driver)
        await flow.until(lambda: len(journal(log, "registration")) > registrations, "registered again")
        assert journal(log, "registration")[-1]["registered"] is True
        await flow.create_pod("go-1")
        claim = await flow.claim_of(await flow.wait_running("go-1"))
        assert any(e["uid"] == claim["metadata"]["uid"] for e in journal(log, "prepare"))

        # slice-publisher (started with --wipe-foreign-slices) left the self-publishing driver's slices.
        slices = (await kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}"))["items"]
        assert [s["spec"]["driver"] for s in slices] == [DRIVER, DRIVER], slices
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
        for resource, name in ((DEVICE_TAINT_RULES, rule), (RESOURCE_POOL_STATUS_REQUESTS, pools)):
            with contextlib.suppress(NotFound):
                await kube.delete(resource, name)


@pytest.mark.timeout(600)
async def test_slices_claims_and_pods_of_draflows_own_driver_pass_a_go_clients_strict_checks(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    """hack/go-api-check over the objects of draflow's own node side: slice-publisher's slices (with its
    driver-unavailable taint once reference-driver stops), the claim, the pod's status."""
    ns = await make_namespace("gp")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=1)
    (node,) = flow.nodes
    fleet = Path(tempfile.mkdtemp(prefix="dgp-", dir="/tmp"))
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects()
        await flow.create_pod("ref-0")
        await flow.wait_running("ref-0")
        driver = next(p for p in flow.procs if p.name.startswith("reference-driver"))
        flow.procs.remove(driver)
        await driver.stop()

        async def tainted() -> bool:
            slices = (await kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}"))["items"]
            devices = [d for s in slices for d in s["spec"].get("devices") or ()]
            return any(t["key"] == DRIVER_UNAVAILABLE_KEY for d in devices for t in d.get("taints") or ())

        await flow.until(tainted, "slice-publisher's driver-unavailable taint")
        report = await go_api_check(testenv, flow)
        assert report["problems"] == [], report["problems"]
        for kind in ("ResourceClaim", "Pod", "Lease", "ResourceSlice"):
            assert report["checked"].get(kind), report["checked"]
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
