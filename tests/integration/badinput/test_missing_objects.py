"""Pods that name objects that do not exist: a DeviceClass, a ResourceClaimTemplate, a ResourceClaim.
Each is reported on the pod (condition or Event naming the missing object), nothing is half-written (no
claim, no allocation), and once the object appears the pod runs: the error was not terminal state."""

from __future__ import annotations

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.dra import claim_names
from draflow_runtime.kube import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration


async def test_missing_device_class_is_reported_and_the_pod_runs_once_it_exists(stack: Stack) -> None:
    missing = stack.name("later-class") + f".{DRIVER}"
    await stack.template("t-no-class", missing)
    await stack.pod("no-class", {"gpu": {"resourceClaimTemplateName": "t-no-class"}})
    message = await stack.wait_condition("no-class", missing, "does not exist")
    assert "gpu" in message, message
    await stack.wait_event("no-class", "FailedScheduling", missing)
    pod = await stack.kube.get(PODS, "no-class", namespace=stack.ns)
    (claim_name,) = claim_names(pod)
    claim = await stack.kube.get(RESOURCE_CLAIMS, claim_name, namespace=stack.ns)
    assert not (claim.get("status") or {}).get("allocation"), claim["status"]
    await stack.still_serving()

    await stack.kube.create(DEVICE_CLASSES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": missing},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    try:
        await stack.flow.wait_running("no-class")
    finally:
        await stack.kube.delete(PODS, "no-class", namespace=stack.ns)
        await stack.kube.delete(DEVICE_CLASSES, missing)


async def test_missing_template_is_reported_and_the_claim_created_once_it_exists(stack: Stack) -> None:
    await stack.pod("no-template", {"gpu": {"resourceClaimTemplateName": "t-later"}})
    event = await stack.wait_event("no-template", "FailedResourceClaimCreation", "t-later")
    assert event["type"] == "Warning"
    assert not claim_names(await stack.kube.get(PODS, "no-template", namespace=stack.ns))
    await stack.still_serving()

    await stack.template("t-later")
    try:
        await stack.flow.wait_running("no-template")
    finally:
        await stack.kube.delete(PODS, "no-template", namespace=stack.ns)


async def test_missing_claim_is_reported_and_the_pod_runs_once_it_exists(stack: Stack) -> None:
    await stack.pod("no-claim", {"gpu": {"resourceClaimName": "shared-later"}})
    event = await stack.wait_event("no-claim", "ResourceClaimNotFound", "shared-later")
    assert event["type"] == "Warning"
    await stack.still_serving()

    await stack.kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared-later"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": stack.flow.device_class}}]}}}, namespace=stack.ns)
    try:
        await stack.flow.wait_running("no-claim")
    finally:
        await stack.kube.delete(PODS, "no-claim", namespace=stack.ns)


async def test_a_claim_deleted_under_its_running_pod_stays_allocated_until_the_pod_ends(stack: Stack) -> None:
    # As upstream: the claim is marked for deletion but keeps its allocation and reservation while the
    # pod that uses it runs; it goes once the pod is gone.
    await stack.flow.create_claim("deleted-under")
    await stack.pod("under", {"gpu": {"resourceClaimName": "deleted-under"}})
    try:
        await stack.flow.wait_running("under")
        await stack.kube.delete(RESOURCE_CLAIMS, "deleted-under", namespace=stack.ns)

        async def held() -> bool:
            claim = await stack.kube.get(RESOURCE_CLAIMS, "deleted-under", namespace=stack.ns)
            status = claim.get("status") or {}
            assert status.get("allocation") and status.get("reservedFor"), status
            return bool(claim["metadata"].get("deletionTimestamp"))

        await stack.until(held, "claim deleted-under marked for deletion, still allocated")
        await consistently(held, 3.0, "claim deleted-under held for its running pod")
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, "under", namespace=stack.ns)
    await stack.flow.wait_claim_gone("deleted-under", "claim deleted-under gone after its pod")
