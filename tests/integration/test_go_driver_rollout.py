"""Upstream's kubeletplugin helper in the ways a real driver DaemonSet uses it, against kubelet-dra-shim:

- an old driver that speaks only DRA v1beta1 and health v1alpha1 (the helper's NodeV1(false),
  HealthV1(false)): the shim negotiates them, as kubelet v1.37.1 does;
- a rolling update (the helper's RollingUpdate(pod UID): sockets named by the pod UID, both instances
  registered for a while): the newer instance takes over, the old one stopping does not unregister it, and
  a claim prepared by the old instance is unprepared by the new one;
- the driver down while a pod is deleted: the unprepare waits for the driver and reaches it when it is back,
  then the claim is deallocated and deleted;
- a driver that leaves for good: its slices are deleted after the grace (as the kubelet wipes them).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from go_driver_kit import journal, start_driver

from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient
from draflow_testenv.fleetflow import DRIVER, ServiceFlow
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
V1BETA1 = "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"


async def slice_uids(kube: KubeClient, node: str) -> set[str]:
    slices = (await kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}"))["items"]
    return {s["metadata"]["uid"] for s in slices if s["spec"]["driver"] == DRIVER}


def calls(path: Path, op: str, uid: str) -> list[str]:
    """The gRPC methods of the journal's ``op`` entries for claim ``uid``."""
    return [e["method"] for e in journal(path, op) if e["uid"] == uid]


@pytest.mark.timeout(600)
async def test_go_driver_old_api_versions_rolling_update_and_downtime(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("gr")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=1)
    (node,) = flow.nodes
    fleet = Path(tempfile.mkdtemp(prefix="dgr-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    old_log, new_log = fleet / node / "old.jsonl", fleet / node / "new.jsonl"
    try:
        # A short grace: a wipe wrongly scheduled when the old instance leaves would show within the test.
        await flow.start(run_service, fleet, reference_driver=False,
                         extra={"slice-publisher": ["--driver-gone-grace", "1"]})
        old = await start_driver(run_service, fleet, node, "--rolling-update-uid", "old-0",
                                 "--node-v1=false", "--health-v1=false", journal=old_log.name)
        flow.procs.append(old)
        await flow.wait_nodes_ready()
        await flow.until(lambda: [e for e in journal(old_log, "registration") if e["registered"]],
                         "the old driver registered")
        await flow.create_objects()

        # The old driver: prepared over v1beta1, device health over v1alpha1.
        await flow.create_pod("before")
        pod = await flow.wait_running("before")
        first = (await flow.claim_of(pod))["metadata"]["uid"]
        assert set(calls(old_log, "prepare", first)) == {V1BETA1 + "NodePrepareResources"}

        async def healthy() -> bool:
            got = await kube.get(PODS, "before", namespace=ns)
            statuses = (got.get("status") or {}).get("containerStatuses") or [{}]
            return any(r.get("health") == "Healthy" for s in statuses[0].get("allocatedResourcesStatus") or ()
                       for r in s["resources"])

        await flow.until(healthy, "health from a v1alpha1-only driver in the pod status")

        # Rolling update: the new instance (v1) registers beside the old one, then the old one stops.
        new = await start_driver(run_service, fleet, node, "--rolling-update-uid", "new-0",
                                 journal=new_log.name)
        flow.procs.append(new)
        await flow.until(lambda: [e for e in journal(new_log, "registration") if e["registered"]],
                         "the new driver registered")
        published = await slice_uids(kube, node)
        flow.procs.remove(old)
        await old.stop()

        async def kept() -> bool:
            return await slice_uids(kube, node) == published

        # The new instance's slices are not wiped when the old one leaves (the grace is 1 s).
        await consistently(kept, 3.0, "the new instance's slices kept", interval=0.25)
        await flow.create_pod("after")
        second = (await flow.claim_of(await flow.wait_running("after")))["metadata"]["uid"]
        assert set(calls(new_log, "prepare", second)) == {V1 + "NodePrepareResources"}
        assert calls(old_log, "prepare", second) == []
        # The claim the old instance prepared is unprepared by the new one.
        before_claim = (await flow.claim_of(pod))["metadata"]["name"]
        await kube.delete(PODS, "before", namespace=ns)
        await flow.wait_claim_gone(before_claim, "the old instance's claim unprepared and deleted")
        assert calls(new_log, "unprepare", first) == [V1 + "NodeUnprepareResources"]

        # Driver down while its pod is deleted: the unprepare reaches the driver once it is back.
        flow.procs.remove(new)
        await new.stop()
        after_claim = (await flow.claim_of(await kube.get(PODS, "after", namespace=ns)))["metadata"]["name"]
        await kube.delete(PODS, "after", namespace=ns)

        async def unprepare_failed() -> bool:
            events = (await kube.list(EVENTS, namespace=ns))["items"]
            return any(e["involvedObject"]["name"] == "after"
                       and e["reason"] == "FailedUnprepareDynamicResources" for e in events)

        await flow.until(unprepare_failed, "the shim's failed unprepare while the driver is down")
        await kube.get(RESOURCE_CLAIMS, after_claim, namespace=ns)  # still there: not unprepared yet
        unprepared = len(journal(new_log, "unprepare"))
        new = await testenv.restart_service(new)
        flow.procs.append(new)
        await flow.wait_claim_gone(after_claim, "the claim unprepared by the restarted driver and deleted")
        assert [e["uid"] for e in journal(new_log, "unprepare")[unprepared:]] == [second]
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()


@pytest.mark.timeout(300)
async def test_slices_of_a_self_publishing_driver_that_left_are_wiped_after_the_grace(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    """Like kubelet v1.37.1 (DRAPluginManager: a driver with no registered endpoint left has the node's
    slices of the driver deleted after the wiping delay), whoever published them: a driver uninstalled
    from a node must not leave devices the allocator keeps handing out."""
    ns = await make_namespace("gw")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=1)
    (node,) = flow.nodes
    fleet = Path(tempfile.mkdtemp(prefix="dgw-", dir="/tmp"))
    try:
        await flow.start(run_service, fleet, reference_driver=False,
                         extra={"slice-publisher": ["--driver-gone-grace", "2"]})
        driver = await start_driver(run_service, fleet, node)
        flow.procs.append(driver)
        await flow.wait_nodes_ready()
        publisher = next(p for p in flow.procs if p.name.startswith("slice-publisher"))
        await flow.until(lambda: "driver has no inventory API" in publisher.log_path.read_text(),
                         "slice-publisher found the self-publishing driver")

        flow.procs.remove(driver)
        await driver.stop()  # its registration socket goes; nothing brings it back

        async def wiped() -> bool:
            slices = (await kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}"))["items"]
            return not [s for s in slices if s["spec"]["driver"] == DRIVER]

        await flow.until(wiped, "the departed driver's slices deleted", within=60)
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
