"""Cluster-scoped objects a user writes that the services answer: ResourcePoolStatusRequests (a pool that
does not exist, the largest limit, one deleted as soon as it is made) and DeviceTaintRules (a NoExecute
rule for a device that does not exist, an effect-None rule selecting every device). Each is answered or
reported on the object itself, and nothing else changes: no pod is evicted, the control pod runs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_POOL_STATUS_REQUESTS

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def cluster_object(stack: Stack, res: Any, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    created: dict[str, Any] = await stack.kube.create(res, body)
    try:
        yield created
    finally:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(res, body["metadata"]["name"])


def _request(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest",
            "metadata": {"name": name}, "spec": {"driver": DRIVER, **spec}}


def _rule(name: str, effect: str, selector: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "draflow.dev/badinput", "value": "x", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": spec}


async def _answer(stack: Stack, name: str) -> dict[str, Any]:
    async def answered() -> dict[str, Any] | None:
        status = (await stack.kube.get(RESOURCE_POOL_STATUS_REQUESTS, name)).get("status")
        return dict(status) if status else None

    status: dict[str, Any] = await stack.until(answered, f"ResourcePoolStatusRequest {name} answered")
    return status


async def test_pool_status_of_a_pool_that_does_not_exist_with_the_largest_limit_is_answered(
    stack: Stack,
) -> None:
    name = f"{stack.ns}-{stack.name('nopool')}"
    async with cluster_object(stack, RESOURCE_POOL_STATUS_REQUESTS,
                              _request(name, poolName="no-such-pool", limit=1000)):
        status = await _answer(stack, name)
        assert status["poolCount"] == 0 and not status.get("pools"), status
        (condition,) = status["conditions"]
        assert (condition["type"], condition["message"]) == ("Complete", "Calculated status for 0 pools")
    await stack.still_serving()


async def test_pool_status_requests_deleted_at_once_leave_the_next_one_answered(stack: Stack) -> None:
    for _ in range(5):
        name = f"{stack.ns}-{stack.name('gone')}"
        await stack.kube.create(RESOURCE_POOL_STATUS_REQUESTS, _request(name))
        await stack.kube.delete(RESOURCE_POOL_STATUS_REQUESTS, name)
    name, pool = f"{stack.ns}-{stack.name('after')}", stack.flow.nodes[0]
    async with cluster_object(stack, RESOURCE_POOL_STATUS_REQUESTS, _request(name, poolName=pool)):
        status = await _answer(stack, name)
        assert status["poolCount"] == 1 and status["pools"][0]["poolName"] == pool, status
    await stack.still_serving()


async def test_a_no_execute_rule_for_a_device_that_does_not_exist_evicts_nothing(stack: Stack) -> None:
    pod = stack.name("bystander")
    await stack.flow.create_pod(pod)
    await stack.flow.wait_running(pod)
    name = f"{stack.ns}-{stack.name('ghost-rule')}"
    try:
        selector = {"driver": DRIVER, "pool": stack.flow.nodes[0], "device": "no-such-device"}
        async with cluster_object(stack, DEVICE_TAINT_RULES, _rule(name, "NoExecute", selector)):
            async def reported() -> dict[str, Any] | None:
                rule = await stack.kube.get(DEVICE_TAINT_RULES, name)
                return next((c for c in (rule.get("status") or {}).get("conditions") or ()
                             if c.get("type") == "EvictionInProgress"), None)

            condition = await stack.until(reported, f"EvictionInProgress of DeviceTaintRule {name}")
            assert condition["status"] == "False" and condition["reason"] == "NotStarted", condition
            await stack.still_serving()
            running = await stack.kube.get(PODS, pod, namespace=stack.ns)
            assert not running["metadata"].get("deletionTimestamp"), "a pod was evicted for no device"
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)


async def test_an_effect_none_rule_selecting_every_device_changes_nothing(stack: Stack) -> None:
    name = f"{stack.ns}-{stack.name('all-none')}"
    async with cluster_object(stack, DEVICE_TAINT_RULES, _rule(name, "None", {})):
        async def reported() -> dict[str, Any] | None:
            rule = await stack.kube.get(DEVICE_TAINT_RULES, name)
            return next((c for c in (rule.get("status") or {}).get("conditions") or ()
                         if c.get("type") == "EvictionInProgress" and c.get("reason") == "NoEffect"), None)

        await stack.until(reported, f"EvictionInProgress NoEffect of DeviceTaintRule {name}")
        await stack.still_serving()
