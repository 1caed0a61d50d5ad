"""deploy/: the five services as processes, each with the token of its own ServiceAccount and exactly the
RBAC of the sim overlay (applied for real into a test namespace): a pod with a ResourceClaimTemplate is
given a claim, a device and a node, is prepared (CDI spec written) and reaches Running on a simulated node.
What each ServiceAccount may do, grant by grant: test_deploy_rbac.py."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from deploy_kit import CONTROLLERS, FIELD_MANAGER, NODE_AGENTS, env_prefix

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.identity import Discovery, apply, apply_order, delete_outside, relocate
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)
async def test_every_service_under_its_own_service_account_runs_a_pod_with_a_claim(
    built: dict[str, list[dict[str, Any]]], testenv: Any, kube: KubeClient,
    make_namespace: Callable[..., Awaitable[str]], run_service: Callable[..., Awaitable[Any]],
) -> None:
    """The happy path with no admin credentials anywhere: each process authenticates with a token of its
    own ServiceAccount, bound only by this repository's RBAC (sim overlay: the node agents share the fleet
    identity). Scoped so that it cannot touch other tests: claim-controller watches one namespace, the
    allocator one scheduler name, the fleet serves one node with a unique name."""
    ns = await make_namespace("e2e")
    suffix = ns.rpartition("-")[2]
    node = f"e2e-{suffix}-0"
    scheduler = f"draflow-e2e-{suffix}"
    device_class = f"e2e-{suffix}.gpu.draflow.example"
    objs = relocate(built["sim"], ns, suffix)
    objs.append({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.draflow.example"'}}]},
    })
    discovery = Discovery(kube)
    fleet = Path(tempfile.mkdtemp(prefix="dtf-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    procs = []
    try:
        for obj in sorted(objs, key=apply_order):
            await apply(kube, discovery, obj, field_manager=FIELD_MANAGER)
        bin_dir = Path(sys.executable).parent
        runs = [
            ("sim-fleet", ["reference-driver", "--node-count", "1", "--node-name-prefix", f"e2e-{suffix}-"]),
            ("sim-fleet", ["kubelet-dra-shim", "--node-count", "1", "--node-name-prefix", f"e2e-{suffix}-"]),
            ("sim-fleet", ["slice-publisher"]),
            ("claim-controller", ["claim-controller", "--namespace", ns]),
            ("structured-allocator", ["structured-allocator", "--scheduler-names", scheduler]),
        ]
        for sa, (service, *args) in runs:
            argv = [str(bin_dir / service), *args, "--http-port", "0"]
            if service in NODE_AGENTS:
                argv += ["--fleet-root", str(fleet)]
            if service in CONTROLLERS:
                argv += ["--leader-elect", "--leader-election-namespace", ns]
            procs.append(await run_service(
                argv, env={env_prefix(service) + "NATS_URL": testenv.nats_url},
                kubeconfig=await testenv.serviceaccount_kubeconfig(ns, sa), name=f"{service}-{suffix}",
            ))
        # The simulated kubelet registers the Node and reports it Ready (the test API server runs without the
        # TaintNodesByCondition admission, as no node lifecycle controller would lift its not-ready taint).
        async def node_reported() -> bool:
            with contextlib.suppress(NotFound):
                return bool((await kube.get(NODES, node)).get("status", {}).get("conditions"))
            return False

        await eventually(node_reported, 60, f"the simulated kubelet reports Node {node}", interval=0.5)
        await kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}},
        }, namespace=ns)
        await kube.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-job"},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {"kubernetes.io/hostname": node},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"claims": [{"name": "gpu"}]}}],
            },
        }, namespace=ns)
        pod: dict[str, Any] = {}

        async def running() -> bool:
            nonlocal pod
            pod = await kube.get(PODS, "gpu-job", namespace=ns)
            if pod.get("status", {}).get("phase") == "Running":
                return True
            dead = [p.name for p in procs if not p.running]
            if dead:  # not an AssertionError: eventually would retry it
                pytest.fail(f"exited: {dead}; logs in {testenv.logs_dir}")
            return False

        with contextlib.suppress(AssertionError):  # the failure below says where the pod got stuck
            await eventually(running, 120, "pod gpu-job Running", interval=0.5)
        if pod.get("status", {}).get("phase") != "Running":
            pytest.fail(f"pod not Running: {pod.get('spec', {}).get('nodeName')} {pod.get('status')}; "
                        f"logs in {testenv.logs_dir}")
        assert pod["spec"]["nodeName"] == node
        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        claim = await kube.get(RESOURCE_CLAIMS, claim_status["resourceClaimName"], namespace=ns)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == ("gpu.draflow.example", node)
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
        # Prepared by the driver through the shim: the claim's CDI spec is on the (simulated) node.
        assert [p.name for p in (fleet / node / "cdi").glob("*.json")] != []
    finally:
        for proc in reversed(procs):
            await proc.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        with contextlib.suppress(NotFound):
            await kube.delete(NODES, node)
        await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
        await delete_outside(kube, discovery, objs, ns)
