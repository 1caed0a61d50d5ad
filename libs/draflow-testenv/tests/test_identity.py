"""draflow_testenv.identity: which objects make up a service's identity, and that installing one gives a
client with that identity and nothing more (the real kube-apiserver, the repository's kustomize builds)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.errors import Forbidden, NotFound
from draflow_runtime.kube import NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient
from draflow_testenv.identity import (
    IDENTITIES,
    IdentitySpec,
    identity_objects,
    install_identity,
    kustomize_build,
    relocate,
    uninstall_identity,
)

pytestmark = pytest.mark.integration  # kustomize builds; the last two also the real kube-apiserver


def _names(objs: list[dict[str, Any]]) -> set[tuple[str, str | None, str]]:
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs}


async def test_an_identity_is_its_service_account_and_exactly_the_roles_bound_to_it() -> None:
    objs = identity_objects(await kustomize_build("overlays/sim"), IDENTITIES["kubelet-dra-shim"])
    assert _names(objs) == {
        ("ServiceAccount", "draflow-node", "kubelet-dra-shim"),
        ("ClusterRole", None, "draflow-kubelet-dra-shim"),
        ("ClusterRoleBinding", None, "draflow-kubelet-dra-shim"),
    }, "other services' roles, the fleet's and the simulated kubelet's are not the shim's"

    sim = identity_objects(await kustomize_build("overlays/sim"),
                           IDENTITIES["kubelet-dra-shim+simulated-kubelet"])
    assert _names(sim) - _names(objs) == {
        ("ClusterRole", None, "draflow-kubelet-dra-shim-simulated-kubelet"),
        ("ClusterRoleBinding", None, "draflow-kubelet-dra-shim-simulated-kubelet-kubelet-dra-shim"),
        ("Role", "kube-node-lease", "draflow-simulated-node-leases"),
        ("RoleBinding", "kube-node-lease", "draflow-simulated-node-leases-kubelet-dra-shim"),
    }
    for binding in (o for o in sim if o["kind"].endswith("Binding")):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kubelet-dra-shim", "namespace": "draflow-node"}]


async def test_bindings_are_narrowed_to_the_one_service_account() -> None:
    fleet = identity_objects(await kustomize_build("overlays/sim"), IDENTITIES["sim-fleet"])
    bound = {o["roleRef"]["name"] for o in fleet if o["kind"].endswith("Binding")}
    # the fleet's own role: slice-publisher's driver-gone DeviceTaintRule in fleet mode (driverrules.py)
    assert bound == {"draflow-reference-driver", "draflow-slice-publisher", "draflow-kubelet-dra-shim",
                     "draflow-kubelet-dra-shim-simulated-kubelet", "draflow-simulated-node-leases",
                     "draflow-sim-fleet-device-taint-rules"}
    assert all(s["name"] == "sim-fleet" for o in fleet for s in o.get("subjects", []))


async def test_undeclared_names_are_errors_not_smaller_identities() -> None:
    built = await kustomize_build("base/reference-driver")
    with pytest.raises(LookupError, match="no ServiceAccount"):
        identity_objects(built, IdentitySpec("base/reference-driver", "nobody"))
    with pytest.raises(LookupError, match="0 roles named"):
        identity_objects(built, IdentitySpec("base/reference-driver", "reference-driver", also_bind=("x",)))


async def test_relocation_moves_draflow_system_and_suffixes_everything_shared() -> None:
    spec = IDENTITIES["kubelet-dra-shim+simulated-kubelet"]
    moved = relocate(identity_objects(await kustomize_build(spec.kustomization), spec), "t-abc", "abc")
    assert _names(moved) == {
        ("ServiceAccount", "t-abc", "kubelet-dra-shim"),
        ("ClusterRole", None, "draflow-kubelet-dra-shim-abc"),
        ("ClusterRoleBinding", None, "draflow-kubelet-dra-shim-abc"),
        ("ClusterRole", None, "draflow-kubelet-dra-shim-simulated-kubelet-abc"),
        ("ClusterRoleBinding", None, "draflow-kubelet-dra-shim-simulated-kubelet-kubelet-dra-shim-abc"),
        ("Role", "kube-node-lease", "draflow-simulated-node-leases-abc"),
        ("RoleBinding", "kube-node-lease", "draflow-simulated-node-leases-kubelet-dra-shim-abc"),
    }
    for binding in (o for o in moved if o["kind"].endswith("Binding")):
        assert binding["roleRef"]["name"].endswith("-abc")
        assert binding["subjects"][0]["namespace"] == "t-abc"


async def test_an_installed_identity_may_do_what_its_rbac_grants_and_nothing_else(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    ns = await make_namespace("ident")
    who = await install_identity(testenv, kube, "reference-driver", ns)
    try:
        assert who.username == f"system:serviceaccount:{ns}:reference-driver"
        with pytest.raises(NotFound):  # granted: get (the claim does not exist, so 404, not 403)
            await who.kube.get(RESOURCE_CLAIMS, "no-such-claim", ns)
        with pytest.raises(Forbidden):  # not granted since the driver's list was dropped (issue 16)
            await who.kube.list(RESOURCE_CLAIMS, ns)
        with pytest.raises(Forbidden):
            await who.kube.list(PODS, ns)
        with pytest.raises(Forbidden):
            await who.kube.delete_collection(RESOURCE_CLAIMS, ns)
    finally:
        await uninstall_identity(kube, who)
    leftovers = [o for o in who.objects if o["metadata"].get("namespace") != ns]
    assert leftovers, "the ClusterRole and its binding were installed outside the namespace"
    for obj in leftovers:
        found = await kube.request("GET", f"/apis/rbac.authorization.k8s.io/v1/{obj['kind'].lower()}s")
        assert obj["metadata"]["name"] not in {o["metadata"]["name"] for o in found["items"]}


async def test_a_node_bound_identity_carries_its_node_and_the_policy_keeps_it_there(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    ns = await make_namespace("ident")
    node = f"ident-{uuid.uuid4().hex[:6]}"
    await kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    try:
        with pytest.raises(ValueError, match="node-bound"):
            await install_identity(testenv, kube, "slice-publisher", ns)
        who = await install_identity(testenv, kube, "slice-publisher", ns, node=node)
        try:
            review = await who.kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                            body={"apiVersion": "authentication.k8s.io/v1",
                                                  "kind": "SelfSubjectReview"})
            assert review["status"]["userInfo"]["extra"]["authentication.kubernetes.io/node-name"] == [node]
            own = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": f"{node}-ident"},
                   "spec": {"driver": "ident.draflow.dev", "nodeName": node,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                            "devices": [{"name": "d0"}]}}
            await who.kube.create(RESOURCE_SLICES, own)
            other = {**own, "metadata": {"name": f"{node}-other"},
                     "spec": {**own["spec"], "nodeName": f"{node}-x"}}
            with pytest.raises(Forbidden, match="may not write a ResourceSlice"):
                await who.kube.create(RESOURCE_SLICES, other)
        finally:
            await uninstall_identity(kube, who)
    finally:
        await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
        await kube.delete(NODES, node)
