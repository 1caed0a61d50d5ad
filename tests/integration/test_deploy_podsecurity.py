"""deploy/: Pod Security on the real kube-apiserver (its PodSecurity admission enforces the namespace labels).

The controllers' namespace (draflow-system) is held to the "restricted" standard and every pod the overlays
put there passes it; the node agents, which need host paths and uid 0, live in draflow-node ("privileged")
and would be refused in the controllers' namespace. Each overlay's namespaces are recreated under test
names with the same labels, and each workload's pod template is created there as a Pod (``dryRun=All``:
admission runs, nothing is stored, no image or node is needed).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from deploy_kit import NAMESPACE, NODE_AGENTS, NODE_NAMESPACE, OVERLAYS, find, workloads

from draflow_runtime.errors import Forbidden
from draflow_runtime.kube import NAMESPACES, KubeClient

pytestmark = pytest.mark.integration

PSA_ENFORCE = "pod-security.kubernetes.io/enforce"


def _pod(workload: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The workload's pod template as a Pod in ``namespace`` (no ServiceAccount: the test namespace's
    ``default`` one; what Pod Security checks is the pod spec)."""
    template = copy.deepcopy(workload["spec"]["template"])
    spec = template["spec"]
    spec.pop("serviceAccountName", None)
    spec.pop("priorityClassName", None)  # system-node-critical: only in kube-system unless a quota allows
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": workload["metadata"]["name"], "namespace": namespace,
                         "labels": template.get("metadata", {}).get("labels", {})},
            "spec": spec}


async def _create(kube: KubeClient, pod: dict[str, Any]) -> None:
    ns = pod["metadata"]["namespace"]
    await kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod, query={"dryRun": "All"})


async def _like(kube: KubeClient, make_namespace: Callable[..., Awaitable[str]], built_ns: dict[str, Any],
                prefix: str) -> str:
    """A test namespace labelled as ``built_ns`` (the Pod Security labels are what matters)."""
    ns = await make_namespace(prefix)
    await kube.patch(NAMESPACES, ns, {"metadata": {"labels": built_ns["metadata"].get("labels", {})}})
    return ns


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_the_controllers_namespace_is_restricted_and_every_pod_in_it_passes(
    built: dict[str, list[dict[str, Any]]], kube: KubeClient,
    make_namespace: Callable[..., Awaitable[str]], overlay: str,
) -> None:
    objs = built[overlay]
    controllers_ns, nodes_ns = find(objs, "Namespace", NAMESPACE), find(objs, "Namespace", NODE_NAMESPACE)
    assert controllers_ns["metadata"]["labels"][PSA_ENFORCE] == "restricted"
    assert nodes_ns["metadata"]["labels"][PSA_ENFORCE] == "privileged"
    restricted = await _like(kube, make_namespace, controllers_ns, "psa-controllers")
    privileged = await _like(kube, make_namespace, nodes_ns, "psa-nodes")

    placed = {NAMESPACE: restricted, NODE_NAMESPACE: privileged}
    in_controllers_ns = []
    for w in workloads(objs):
        pod = _pod(w, placed[w["metadata"]["namespace"]])
        await _create(kube, pod)  # raises Forbidden if Pod Security refuses it
        if w["metadata"]["namespace"] == NAMESPACE:
            in_controllers_ns.append(w["metadata"]["name"])
    assert {"claim-controller", "structured-allocator"} <= set(in_controllers_ns)

    # The node agents could not run with the controllers: restricted refuses their host paths and uid 0.
    agents = [w for w in workloads(objs) if w["metadata"]["name"] in NODE_AGENTS]
    for w in agents:
        with pytest.raises(Forbidden, match="violates PodSecurity"):
            await _create(kube, _pod(w, restricted))
