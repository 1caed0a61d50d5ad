"""Pods asking for DRA-backed extended resources (DRAExtendedResource) in odd quantities: none (0), more
than any node has (a million, the int64 maximum), a fraction, and a name two DeviceClasses map. A pod
that cannot run is told so on its condition and nothing is left half-written (no special claim, no
device held); the others run."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


async def _pod(stack: Stack, name: str, resource: str, count: str) -> None:
    await stack.kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": stack.flow.scheduler,
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In",
                          "values": stack.flow.nodes}]}]}}},
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": {resource: count}}}]},
    }, namespace=stack.ns)


async def _special_claims(stack: Stack, pod: str) -> list[dict[str, Any]]:
    claims = (await stack.kube.list(RESOURCE_CLAIMS, namespace=stack.ns)).get("items") or []
    return [c for c in claims if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"
            and any(o.get("name") == pod for o in c["metadata"].get("ownerReferences") or ())]


def _implicit(stack: Stack) -> str:
    return f"deviceclass.resource.kubernetes.io/{stack.flow.device_class}"


@pytest.mark.parametrize("count", ["1000000", "9223372036854775807"], ids=["million", "int64-max"])
async def test_more_devices_than_any_node_has_is_told_and_holds_nothing(stack: Stack, count: str) -> None:
    pod = stack.name("greedy")
    await _pod(stack, pod, _implicit(stack), count)
    try:
        message = await stack.wait_condition(pod, f"adding {count} devices exceeds the claim limit of 32")
        assert "<extended-resources>" in message, message
        assert not await _special_claims(stack, pod)
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)


async def test_zero_of_a_mapped_resource_runs_without_a_claim(stack: Stack) -> None:
    pod = stack.name("zero")
    await _pod(stack, pod, _implicit(stack), "0")
    try:
        running = await stack.flow.wait_running(pod)
        assert not (running.get("status") or {}).get("extendedResourceClaimStatus")
        assert not await _special_claims(stack, pod)
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)


async def test_a_fractional_device_count_is_told_and_creates_no_claim(stack: Stack) -> None:
    # The API server accepts any quantity for a name under kubernetes.io/ (it is not an "extended
    # resource" to its validation), so 500m of deviceclass.resource.kubernetes.io/<class> gets through.
    # Before: the allocator created the special claim with no request, the pod status write was refused
    # (no request mapping), the claim deleted, and again, forever, with nothing on the pod.
    pod = stack.name("half")
    resource = _implicit(stack)
    await _pod(stack, pod, resource, "500m")
    try:
        message = await stack.wait_condition(pod, "500m", resource, "whole number")
        assert 'container "main"' in message, message
        assert not await _special_claims(stack, pod)
        key = f"{stack.ns}/{pod}"
        created = [r for r in stack.log_since("structured-allocator")
                   if r.get("event") == "extended resource claim created" and r.get("pod") == key]
        assert not created, created
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)


async def test_a_name_two_classes_map_is_served_by_the_newer_class(stack: Stack) -> None:
    resource = f"{stack.name('twice')}.draflow.example/gpu"
    older, newer = stack.name("older-class") + f".{DRIVER}", stack.name("newer-class") + f".{DRIVER}"
    await stack.kube.create(DEVICE_CLASSES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": older},
        "spec": {"selectors": [{"cel": {"expression": "false"}}], "extendedResourceName": resource}})
    pod = stack.name("twice")
    try:
        # The older class selects nothing: the pod cannot run while it is the only mapping.
        await _pod(stack, pod, resource, "1")
        await stack.wait_condition(pod, "0/")
        # Creation timestamps have one-second resolution: make "newer" really newer.
        await _wait_a_second(stack)
        await stack.kube.create(DEVICE_CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": newer},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                     "extendedResourceName": resource}})
        running = await stack.flow.wait_running(pod)
        (claim,) = await _special_claims(stack, pod)
        (request,) = claim["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == newer
        status = running["status"]["extendedResourceClaimStatus"]
        assert status["resourceClaimName"] == claim["metadata"]["name"]
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        for name in (older, newer):
            await _delete_class(stack, name)


async def _wait_a_second(stack: Stack) -> None:
    start = time.time()

    async def later() -> bool:
        return time.time() - start >= 1.1

    await stack.until(later, "one second later")


async def _delete_class(stack: Stack, name: str) -> None:
    with contextlib.suppress(NotFound):
        await stack.kube.delete(DEVICE_CLASSES, name)
