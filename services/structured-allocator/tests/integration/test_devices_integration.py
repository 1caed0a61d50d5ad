"""DeviceTaintRules, binding conditions and PostFilter deallocation against a real kube-apiserver."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from sa_kit import Kit, devices_of, eventually

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER as FINALIZER
from draflow_runtime.kube import NODES, PODS, RESOURCE_CLAIMS
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def _event_reasons(kit: Kit, pod: str) -> dict[str, str]:
    return {e["reason"]: e.get("message", "") for e in await kit.events(pod)}


# -- DeviceTaintRules ------------------------------------------------------------------------------


async def test_device_taint_rule_steers_pods_away_unless_the_claim_tolerates_it(kit: Kit) -> None:
    n0, n1 = await kit.node("n0"), await kit.node("n1")
    await kit.slice(n0, 1)
    await kit.slice(n1, 1)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.template("tolerant", tolerations=[{"key": MAINTENANCE["key"], "operator": "Exists"}])
    sched = await kit.start()
    await kit.taint_rule("maintenance", MAINTENANCE, driver=kit.driver, pool=n0)

    async def tainted() -> bool:
        return any(d.taints for s in sched.state.slices.slices_for_node(n0) for d in s.devices)
    await eventually(tainted, what="rule taint applied to n0's devices")

    await kit.template_pod("steered", "one-gpu")
    assert await kit.wait_bound("steered") == n1
    # n1 is full now and n0's device is tainted: the explanation says so.
    await kit.template_pod("blocked", "one-gpu")
    message = await kit.wait_condition("blocked", "taints")
    # Other suites share this API server and may leave Nodes behind: none of them may be usable either.
    assert re.search(r"\b0/\d+ nodes are available", message), message
    claim = await kit.claim_of("blocked")
    explanation = sched.explanations.get(f"{kit.namespace}/{claim['metadata']['name']}")
    assert explanation is not None
    assert explanation["bestNode"]["requests"][0]["blocked_by_taints"] == 1
    # A claim that tolerates the taint may use the tainted device.
    await kit.template_pod("tolerating", "tolerant")
    assert await kit.wait_bound("tolerating") == n0
    claim = await kit.claim_of("tolerating")
    assert devices_of(claim) == [f"{kit.driver}/{n0}/gpu-0"]
    assert claim["status"]["allocation"]["devices"]["results"][0]["tolerations"][0]["key"] == \
        MAINTENANCE["key"]


# -- binding conditions ------------------------------------------------------------------------------


async def _set_device_conditions(kit: Kit, claim: dict[str, Any], **conditions: str) -> None:
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    body = {"status": {"devices": [{
        "driver": result["driver"], "pool": result["pool"], "device": result["device"],
        "conditions": [{"type": t, "status": s, "reason": "Test", "message": "set by the test",
                        "lastTransitionTime": _now()} for t, s in conditions.items()]}]}}
    await kit.kube.patch(RESOURCE_CLAIMS, claim["metadata"]["name"], body, kit.namespace,
                         subresource="status")


async def _allocated_claim(kit: Kit, pod: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        claim = await kit.claim_of(pod)
        return claim if (claim.get("status") or {}).get("allocation") else None
    return await eventually(check, what=f"claim of {pod} allocated")


BINDING = {"bindsToNode": True, "bindingConditions": ["Attached"],
           "bindingFailureConditions": ["AttachFailed"]}


async def test_pod_is_bound_only_once_binding_conditions_are_true(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1, **BINDING)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.start(binding_poll_interval=1.0)
    await kit.template_pod("p", "one-gpu")
    claim = await _allocated_claim(kit, "p")
    allocation = claim["status"]["allocation"]
    assert allocation["allocationTimestamp"]
    assert allocation["devices"]["results"][0]["bindingConditions"] == ["Attached"]
    await eventually(lambda: _has_event(kit, "p", "BindingConditionsPending"), what="pending event")
    await _set_device_conditions(kit, claim, Attached="False")

    async def unbound() -> bool:
        return not (await kit.kube.get(PODS, "p", kit.namespace))["spec"].get("nodeName")

    await consistently(unbound, 1.5, "pod p unbound while Attached is False")  # > binding_poll_interval
    assert await unbound()
    await _set_device_conditions(kit, claim, Attached="True")
    assert await kit.wait_bound("p") == node
    final = await kit.claim_of("p")
    assert devices_of(final) == devices_of(claim)
    assert [r["name"] for r in final["status"]["reservedFor"]] == ["p"]


async def test_binding_failure_condition_deallocates_and_retries(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1, **BINDING)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.start(binding_poll_interval=1.0)
    await kit.template_pod("p", "one-gpu")
    claim = await _allocated_claim(kit, "p")
    await _set_device_conditions(kit, claim, Attached="False", AttachFailed="True")
    reasons = await eventually(lambda: _has_event(kit, "p", "FailedBinding"), what="FailedBinding event")
    assert "AttachFailed" in reasons["FailedBinding"]

    async def retried() -> dict[str, Any] | None:
        # deallocation cleared status.devices (only a deallocation does); the retry allocated again
        c = await kit.claim_of("p")
        status = c.get("status") or {}
        return c if status.get("allocation") and not status.get("devices") else None
    again = await eventually(retried, what="claim deallocated and allocated again")
    assert not (await kit.kube.get(PODS, "p", kit.namespace))["spec"].get("nodeName")
    await _set_device_conditions(kit, again, Attached="True")
    assert await kit.wait_bound("p") == node


async def _has_event(kit: Kit, pod: str, reason: str) -> dict[str, str] | None:
    reasons = await _event_reasons(kit, pod)
    return reasons if reason in reasons else None


# -- PostFilter deallocation --------------------------------------------------------------------------


async def test_claim_allocated_on_a_node_that_stopped_working_is_deallocated_and_moved(kit: Kit) -> None:
    bad, good = await kit.node("bad"), await kit.node("good")
    await kit.slice(bad, 1)
    await kit.slice(good, 1)
    await kit.device_class_()
    claim = await kit.claim("pinned")
    claim = await kit.kube.patch(RESOURCE_CLAIMS, "pinned", {"metadata": {"finalizers": [FINALIZER]}},
                                 kit.namespace)
    claim["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": kit.driver, "pool": bad, "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [bad]}]}]}}}
    await kit.kube.replace(RESOURCE_CLAIMS, claim, subresource="status")
    await kit.kube.patch(NODES, bad, {"spec": {"unschedulable": True}})
    await kit.start()
    await kit.pod("p", {"gpu": {"resourceClaimName": "pinned"}})
    assert await kit.wait_bound("p") == good
    final = await kit.kube.get(RESOURCE_CLAIMS, "pinned", kit.namespace)
    assert devices_of(final) == [f"{kit.driver}/{good}/gpu-0"]
    assert [r["name"] for r in final["status"]["reservedFor"]] == ["p"]
    assert FINALIZER in final["metadata"]["finalizers"]
    # the Event is written after the deallocation, concurrently with the retry that binds the pod
    reasons = await eventually(lambda: _has_event(kit, "p", "ClaimDeallocated"), what="ClaimDeallocated")
    assert "ClaimDeallocated" in reasons, reasons


async def test_claim_reserved_by_another_pod_is_never_deallocated(kit: Kit) -> None:
    bad = await kit.node("bad")
    good = await kit.node("good")
    await kit.slice(bad, 1)
    await kit.slice(good, 1)
    await kit.device_class_()
    await kit.claim("pinned")
    claim = await kit.kube.get(RESOURCE_CLAIMS, "pinned", kit.namespace)
    claim["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": kit.driver, "pool": bad, "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [bad]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "someone-else", "uid": "0000-other"}]}
    await kit.kube.replace(RESOURCE_CLAIMS, claim, subresource="status")
    await kit.kube.patch(NODES, bad, {"spec": {"unschedulable": True}})
    await kit.start()
    await kit.pod("p", {"gpu": {"resourceClaimName": "pinned"}})
    message = await kit.wait_condition("p", "nodes are available")
    assert re.search(r"\b0/\d+ nodes are available", message), message

    async def kept() -> bool:
        return devices_of(await kit.kube.get(RESOURCE_CLAIMS, "pinned", kit.namespace)) == [
            f"{kit.driver}/{bad}/gpu-0"]

    await consistently(kept, 1.0, "claim pinned keeps its allocation on node bad")
    final = await kit.kube.get(RESOURCE_CLAIMS, "pinned", kit.namespace)
    assert devices_of(final) == [f"{kit.driver}/{bad}/gpu-0"]


async def test_allocated_claim_whose_binding_failed_is_unavailable_and_given_back(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1, **BINDING)
    await kit.device_class_()
    await kit.claim("failed")
    claim = await kit.kube.patch(RESOURCE_CLAIMS, "failed", {"metadata": {"finalizers": [FINALIZER]}},
                                 kit.namespace)
    result = {"request": "gpu", "driver": kit.driver, "pool": node, "device": "gpu-0",
              "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
    claim["status"] = {
        "allocation": {"devices": {"results": [result]}, "allocationTimestamp": _now(),
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "devices": [{"driver": kit.driver, "pool": node, "device": "gpu-0", "conditions": [
            {"type": "AttachFailed", "status": "True", "reason": "Test", "message": "cable unplugged",
             "lastTransitionTime": _now()}]}]}
    await kit.kube.replace(RESOURCE_CLAIMS, claim, subresource="status")
    await kit.start(binding_poll_interval=1.0)
    await kit.pod("p", {"gpu": {"resourceClaimName": "failed"}})

    async def reallocated() -> dict[str, Any] | None:
        c = await kit.kube.get(RESOURCE_CLAIMS, "failed", kit.namespace)
        status = c.get("status") or {}
        return c if status.get("allocation") and not status.get("devices") else None
    again = await eventually(reallocated, what="failed claim deallocated and allocated again")
    # the Event is written after the deallocation, concurrently with the retry that allocates again
    reasons = await eventually(lambda: _has_event(kit, "p", "ClaimDeallocated"), what="ClaimDeallocated")
    assert "ClaimDeallocated" in reasons, reasons
    assert "cable unplugged" in reasons.get("FailedScheduling", ""), reasons
    await _set_device_conditions(kit, again, Attached="True")
    assert await kit.wait_bound("p") == node
