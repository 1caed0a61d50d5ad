"""``TestHandleWatchResourcesStream/HealthChangeForMultiplePodsWithSharedDevice``, ``.../HealthChangeFor
DeviceWithShareID`` and ``.../NonAllocatedDeviceChange`` of kubelet v1.37.1 restated (``kubelet_map.py``):
one device in two claims of two pods on the node; when its driver reports it Unhealthy both pods show it,
and a device no pod uses never shows in any pod. Real API server; the test-only driver streams health over
real gRPC on real unix sockets."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env

from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration


async def _allocate(env: Env, ns: str, name: str, p: dict[str, Any]) -> None:
    status = {
        "allocation": {
            "devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": env.node, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [env.node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}],
    }
    await env.kube.patch(RESOURCE_CLAIMS, name, {"status": status}, namespace=ns, subresource="status")


def _health(env: Env, ns: str, name: str, want: str) -> Any:
    async def check() -> bool:
        p = await env.kube.get(PODS, name, namespace=ns)
        if p["status"].get("phase") != "Running":
            return False
        (entry,) = p["status"]["containerStatuses"][0].get("allocatedResourcesStatus") or [{"resources": []}]
        resources = entry["resources"]
        assert all(r["resourceID"].endswith("-gpu-0") for r in resources), resources  # never gpu-9
        return [r["health"] for r in resources] == [want]
    return check


async def test_a_device_of_two_pods_claims_shows_its_health_in_both_and_no_other_device_shows(
    env: Env, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-shared")
    env.driver.set_health(env.node, "gpu-0", health_v1.HEALTHY)
    env.driver.set_health(env.node, "gpu-9", health_v1.UNHEALTHY)  # no claim has it
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    for name in ("a", "b"):
        await claim(env.kube, ns, name, cls)
        p = await pod(env.kube, ns, f"p-{name}", env.node, [name])
        await _allocate(env, ns, name, p)
    await eventually(_health(env, ns, "p-a", "Healthy"))
    await eventually(_health(env, ns, "p-b", "Healthy"))

    env.driver.set_health(env.node, "gpu-0", health_v1.UNHEALTHY)
    env.driver.set_health(env.node, "gpu-9", health_v1.HEALTHY)
    await eventually(_health(env, ns, "p-a", "Unhealthy"))
    await eventually(_health(env, ns, "p-b", "Unhealthy"))
