"""The real cluster itself: a Node that is Ready, an ordinary pod scheduled by kube-scheduler and run by the
kubelet in containerd from an image built on this machine, its log read through the API server."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from draflow_testenv import images, node_cleanup
from draflow_testenv.cluster import ClusterEnvironment
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.e2e


async def _pod(cluster: ClusterEnvironment, ns: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = await cluster.admin.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return pod


async def test_plain_pod_runs_and_its_log_is_readable(cluster: ClusterEnvironment) -> None:
    ns = f"e2e-{uuid.uuid4().hex[:6]}"
    await cluster.admin.ensure_namespace(ns)
    marker = uuid.uuid4().hex
    await cluster.admin.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello"},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": images.WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                            "command": ["/bin/sh", "-c", f"echo hello-{marker}; exec sleep 3600"]}],
        },
    })

    async def running() -> dict[str, Any] | None:
        pod = await _pod(cluster, ns, "hello")
        return pod if pod.get("status", {}).get("phase") == "Running" else None

    pod = await eventually(running, timeout=120, what="pod hello Running", interval=0.5)
    # placed by the real kube-scheduler on one of the nodes
    assert pod["spec"]["nodeName"] in {n.name for n in cluster.node_layouts}

    async def logged() -> str | None:
        text = await cluster.pod_log(ns, "hello")
        return text if f"hello-{marker}" in text else None

    await eventually(logged, timeout=60, what="the container's log line through the API", interval=0.5)

    await cluster.admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/hello")

    async def gone() -> bool:
        try:
            await _pod(cluster, ns, "hello")
        except Exception as exc:
            return "404" in str(exc)
        return False

    await eventually(gone, timeout=60, what="pod hello deleted by the kubelet", interval=0.5)


async def test_stop_leaves_no_process_mount_cgroup_or_interface(tmp_path: Path) -> None:
    env = ClusterEnvironment(tmp_path / "state", node_name="draflow-node-stop")
    await env.start()
    try:
        layout = env.node
        await env.admin.request("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "leftover"},
            "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "main", "image": images.WORKLOAD_IMAGE,
                                     "imagePullPolicy": "Never", "command": ["/bin/sleep", "3600"]}]},
        })

        async def running() -> bool:
            pod = await env.admin.request("GET", "/api/v1/namespaces/default/pods/leftover")
            return bool(pod.get("status", {}).get("phase") == "Running")

        await eventually(running, timeout=120, what="pod leftover Running", interval=0.5)
        left = await asyncio.to_thread(node_cleanup.leftovers, layout)
        assert any(x.startswith("mount ") for x in left)  # the pod's sandbox and rootfs are mounted there
        assert any(x.startswith("process ") for x in left)  # its shim and container
        assert any(x.startswith("cgroup ") for x in left)
    finally:
        await env.stop()  # the pod is still running: stop() must take it down

    assert await asyncio.to_thread(node_cleanup.leftovers, layout) == []
