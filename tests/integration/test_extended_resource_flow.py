"""Extended resources backed by DRA (DRAExtendedResource), end to end with the five services: pods ask
for GPUs the old way (``resources.limits``), by a DeviceClass's ``extendedResourceName`` and by the
implicit ``deviceclass.resource.kubernetes.io/<class>`` name → structured-allocator creates the special
ResourceClaim (owned by the pod, annotation ``resource.kubernetes.io/extended-resource-claim``), allocates
and reserves it, records ``pod.status.extendedResourceClaimStatus`` and binds → kubelet-dra-shim prepares
it with reference-driver → Running. Pod deleted → claim-controller deallocates and deletes the claim.

Before: the allocator refused such pods (``draflow does not support extended resources backed by DRA``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from go_driver_kit import go_api_check

from draflow_runtime.kube import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.fleetflow import DRIVER, ServiceFlow

pytestmark = pytest.mark.integration

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def _pod(flow: ServiceFlow, name: str, resource: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": flow.scheduler,
                 "nodeSelector": {"kubernetes.io/hostname": flow.nodes[0]},
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": {resource: str(count)}}}]},
    }


@pytest.mark.timeout(600)
async def test_pods_asking_for_dra_backed_extended_resources_run_and_their_claims_go_with_them(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("extres")
    suffix = ns.rpartition("-")[2]
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=1, gpus=4)
    explicit = f"wf-{suffix}.draflow.example/gpu"
    implicit = f"deviceclass.resource.kubernetes.io/{flow.device_class}"
    fleet = Path(tempfile.mkdtemp(prefix="dxr-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await kube.create(DEVICE_CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": flow.device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                     "extendedResourceName": explicit}})
        await kube.create(PODS, _pod(flow, "two-gpus", explicit, 2), namespace=ns)
        await kube.create(PODS, _pod(flow, "one-gpu", implicit, 1), namespace=ns)

        claims: dict[str, dict[str, Any]] = {}
        for name, resource, count in (("two-gpus", explicit, 2), ("one-gpu", implicit, 1)):
            pod = await flow.wait_running(name)  # refused before: "does not support extended resources"
            status = pod["status"]["extendedResourceClaimStatus"]
            assert status["requestMappings"] == [
                {"containerName": "main", "resourceName": resource, "requestName": "container-0-request-0"}]
            claim = await kube.get(RESOURCE_CLAIMS, status["resourceClaimName"], namespace=ns)
            meta = claim["metadata"]
            assert meta["name"].startswith(f"{name}-extended-resources-")
            assert meta["annotations"][ANNOTATION] == "true"
            assert [(o["kind"], o["uid"], o.get("controller")) for o in meta["ownerReferences"]] == [
                ("Pod", pod["metadata"]["uid"], True)]
            (request,) = claim["spec"]["devices"]["requests"]
            assert request["name"] == "container-0-request-0"
            assert request["exactly"]["deviceClassName"] == flow.device_class
            assert request["exactly"]["count"] == count
            results = claim["status"]["allocation"]["devices"]["results"]
            assert len(results) == count and {r["request"] for r in results} == {"container-0-request-0"}
            assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
            # The container sees the claim's devices, through the request mapped to it (it saw none).
            seen = json.loads(pod["metadata"]["annotations"]["draflow.dev/cdi-devices"])
            assert list(seen) == ["main"] and len(seen["main"]) == count, seen
            assert all(f"={meta['uid']}-" in cdi_id for cdi_id in seen["main"]), seen
            claims[name] = claim
        devices = [r["device"] for c in claims.values()
                   for r in c["status"]["allocation"]["devices"]["results"]]
        assert len(set(devices)) == 3  # never a device twice
        # A Go client's strict decoding and upstream's validation of the special claims and the pods'
        # extendedResourceClaimStatus (hack/go-api-check).
        report = await go_api_check(testenv, flow)
        assert report["problems"] == [], report["problems"]
        assert report["checked"]["ResourceClaim"] == 2 and report["checked"]["Pod"] == 2, report["checked"]

        for name, claim in claims.items():
            await kube.delete(PODS, name, namespace=ns)

            await flow.wait_claim_gone(claim["metadata"]["name"],
                                       f"the extended resource claim of {name} deleted")
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
