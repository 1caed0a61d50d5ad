"""draflow's node agents on the real cluster under upstream's control plane alone: claim-controller and
structured-allocator scaled to zero, kube-controller-manager v1.37.1 with its resourceclaim and
device-taint-eviction controllers on (the cluster's own runs every other controller), the cluster's
kube-scheduler. A pod with a template claim and the default scheduler gets its claim from kcm, its device
from kube-scheduler, is prepared by its node's real kubelet calling draflow's reference driver, and its real
container sees the CDI-injected device; deleting it unprepares and kcm deletes the claim."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from draflow_testenv import deploy_e2e, images
from draflow_testenv.cluster import ClusterEnvironment
from draflow_testenv.upstream import start_controller_manager
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.e2e
DRIVER = "gpu.draflow.example"
CONTROLLERS = ("claim-controller", "structured-allocator")
KCM_DRA = ("resourceclaim-controller", "device-taint-eviction-controller")


async def _scale(cluster: ClusterEnvironment, replicas: int) -> None:
    """claim-controller and structured-allocator to ``replicas``; waits until that many pods of each run
    (0: none is left)."""
    ns = deploy_e2e.NAMESPACE
    for name in CONTROLLERS:
        await cluster.admin.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale",
                                    {"spec": {"replicas": replicas}},
                                    content_type="application/merge-patch+json")

    async def scaled() -> bool:
        pods = (await cluster.admin.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
        names = [p["metadata"].get("labels", {}).get("app.kubernetes.io/name") for p in pods]
        if replicas == 0:
            return not any(n in CONTROLLERS for n in names)
        return await deploy_e2e.workloads_ready(cluster)

    await eventually(scaled, timeout=180, interval=1.0, what=f"draflow's controllers at {replicas} replicas")


async def _get(cluster: ClusterEnvironment, path: str) -> Any:
    return await cluster.admin.request("GET", path)


@pytest.mark.timeout(900)  # the first use builds the draflow image
async def test_a_template_claim_pod_runs_under_upstream_scheduler_and_controller_manager(
        cluster: ClusterEnvironment, installed: list[dict[str, Any]]) -> None:
    await eventually(lambda: deploy_e2e.workloads_ready(cluster), timeout=240, interval=1.0,
                     what="draflow Ready")
    await _scale(cluster, 0)
    kcm = None
    try:
        kcm = await start_controller_manager(cluster, cluster.run_service, controllers=KCM_DRA,
                                             feature_gates=False, name="kube-controller-manager-dra")
        ns = f"e2e-up-{uuid.uuid4().hex[:6]}"
        await cluster.admin.ensure_namespace(ns)
        await cluster.admin.ensure(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}},
        })
        await cluster.admin.request("POST", f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-user"},
            "spec": {
                "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": images.WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                                "command": ["/bin/sh", "-c",
                                            "env | sort | grep '^DRAFLOW_GPU'; exec sleep 3600"],
                                "resources": {"claims": [{"name": "gpu"}]}}],
            },
        })

        async def running() -> dict[str, Any] | None:
            pod = await _get(cluster, f"/api/v1/namespaces/{ns}/pods/gpu-user")
            return pod if pod.get("status", {}).get("phase") == "Running" else None

        pod = await eventually(running, timeout=180, interval=1.0, what="gpu-user Running")
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        node = cluster.layout(pod["spec"]["nodeName"])
        claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim = await _get(cluster, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}")
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == (DRIVER, node.name)

        async def device_env() -> str | None:
            text = await cluster.pod_log(ns, "gpu-user")
            return text if "DRAFLOW_GPU_" in text else None

        text = await eventually(device_env, timeout=60, interval=0.5,
                                what="DRAFLOW_GPU_* in the container log")
        assert f"_CLAIM={ns}/{claim_name}" in text
        uid = claim["metadata"]["uid"]
        assert any(uid in p.name for p in node.cdi_dir.iterdir()), "no CDI spec for the prepared claim"

        await cluster.admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/gpu-user")

        async def cleaned() -> bool:
            path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
            claims = (await _get(cluster, path))["items"]
            return not claims and not any(uid in p.name for p in node.cdi_dir.iterdir())

        await eventually(cleaned, timeout=120, interval=0.5,
                         what="CDI spec removed and the claim deleted by kcm")
    finally:
        if kcm is not None:
            await kcm.stop()
        await _scale(cluster, 1)
