"""NoExecute device taints end to end with the five services (DRADeviceTaintRules): a pod runs on a
device (structured-allocator, kubelet-dra-shim + reference-driver); a DeviceTaintRule with effect
NoExecute selecting exactly that device → claim-controller evicts the pod (Event, DisruptionTarget), the
simulated kubelet unprepares and removes it, its generated claim is deallocated and deleted, the rule's
status says one pod was evicted; a new pod is allocated the other, untainted device and keeps running.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, EVENTS, PODS, KubeClient
from draflow_testenv.fleetflow import ServiceFlow

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)
async def test_no_execute_rule_evicts_the_running_pod_and_new_pods_avoid_the_device(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("evict")
    suffix = ns.rpartition("-")[2]
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=1, gpus=2)
    rule_name = f"evict-{suffix}"
    fleet = Path(tempfile.mkdtemp(prefix="dte-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects()
        await flow.create_pod("victim")
        victim = await flow.wait_running("victim")
        claim = await flow.claim_of(victim)
        (result,) = claim["status"]["allocation"]["devices"]["results"]

        rule = await kube.create(DEVICE_TAINT_RULES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": rule_name},
            "spec": {"deviceSelector": {k: result[k] for k in ("driver", "pool", "device")},
                     "taint": {"key": "draflow.dev/maintenance", "effect": "NoExecute"}}})

        async def victim_gone() -> bool:
            try:
                current = await kube.get(PODS, "victim", namespace=ns)
            except NotFound:
                return True
            return current["metadata"]["uid"] != victim["metadata"]["uid"]
        await flow.until(victim_gone, "the pod on the tainted device evicted and gone")

        events = (await kube.list(EVENTS, ns, field_selector="involvedObject.name=victim"))["items"]
        assert [e["message"] for e in events if e["reason"] == "DeviceTaintManagerEviction"] == [
            "Marking for deletion"]

        await flow.wait_claim_gone(claim["metadata"]["name"],
                                   "the evicted pod's claim deallocated and deleted")

        async def reported() -> dict[str, Any] | None:
            current = await kube.get(DEVICE_TAINT_RULES, rule_name)
            return next((c for c in (current.get("status") or {}).get("conditions") or ()
                         if c["type"] == "EvictionInProgress" and c["reason"] == "Completed"), None)
        condition = await flow.until(reported, "the rule reports the eviction")
        assert condition["message"] == "1 pod evicted since starting the controller."
        assert condition["observedGeneration"] == rule["metadata"]["generation"]

        await flow.create_pod("next")
        replacement = await flow.wait_running("next")
        (other,) = (await flow.claim_of(replacement))["status"]["allocation"]["devices"]["results"]
        assert other["device"] != result["device"], "the allocator does not pick the tainted device"
        current = await kube.get(PODS, "next", namespace=ns)
        assert not current["metadata"].get("deletionTimestamp")
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(DEVICE_TAINT_RULES, rule_name)
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
