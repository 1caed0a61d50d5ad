"""A service under exactly the identity ``deploy/kustomize`` grants it, for its integration tests.

``install_identity(env, kube, "claim-controller", namespace)``: ``kustomize build`` of the kustomization that
deploys the service, the ServiceAccount and the roles bound to it taken from that build, moved from
``draflow-system`` (controllers) or ``draflow-node`` (node agents) into the test namespace (cluster-scoped
names and roles of other namespaces get the namespace's suffix, so parallel tests never share them),
applied for real with server-side apply, then a
real ServiceAccount token from the TokenRequest API. The service code under test gets a ``KubeClient``
(or, for a subprocess, a kubeconfig) with that token and nothing else: a permission the RBAC lacks fails
the test with the API server's 403, one the code does not need is caught by
tests/integration/test_deploy_rbac.py.

Node agents whose identity is node-scoped (slice-publisher: its ValidatingAdmissionPolicy) get a token bound
to a pod on their node, the way the kubelet's projected token is; the API server then adds the
``authentication.kubernetes.io/node-name`` extra the policy reads.

``IDENTITIES`` names what can be installed; the pytest fixture ``service_identity`` runs a test once as the
admin and once under the identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from draflow_runtime.errors import Forbidden, Invalid, NotFound
from draflow_runtime.kube import KubeClient
from draflow_testenv.binaries import ensure_binary, repo_root

if TYPE_CHECKING:
    from draflow_testenv.environment import Environment

SOURCE_NAMESPACE = "draflow-system"  # the controllers'
SOURCE_NAMESPACES = (SOURCE_NAMESPACE, "draflow-node")  # and the node agents' (base/common/namespace.yaml)
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
ADMISSION_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
FIELD_MANAGER = "draflow-testenv"
RBAC_API = "rbac.authorization.k8s.io"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


@dataclass(frozen=True)
class IdentitySpec:
    """Where a service's identity is declared (a kustomization under ``deploy/kustomize``)."""

    kustomization: str
    service_account: str
    also_bind: tuple[str, ...] = ()
    """Roles of that build bound to this ServiceAccount in addition to its own bindings (by name)."""
    admission: bool = False
    """Also apply the build's ValidatingAdmissionPolicies (cluster-wide, identical content, left in place)."""
    node_bound: bool = False
    """The token is bound to a pod on the node passed to ``install_identity``."""


IDENTITIES: dict[str, IdentitySpec] = {
    "claim-controller": IdentitySpec("base/claim-controller", "claim-controller"),
    "structured-allocator": IdentitySpec("base/structured-allocator", "structured-allocator"),
    "slice-publisher": IdentitySpec("base/slice-publisher", "slice-publisher", admission=True,
                                    node_bound=True),
    "kubelet-dra-shim": IdentitySpec("base/kubelet-dra-shim", "kubelet-dra-shim"),
    # The shim's own rights plus the simulated kubelet's (the rows its README marks "simulated kubelet
    # only"), as the sim overlay declares them; there the fleet's ServiceAccount holds both.
    "kubelet-dra-shim+simulated-kubelet": IdentitySpec(
        "overlays/sim", "kubelet-dra-shim",
        also_bind=("draflow-kubelet-dra-shim-simulated-kubelet", "draflow-simulated-node-leases"),
    ),
    "reference-driver": IdentitySpec("base/reference-driver", "reference-driver"),
    "sim-fleet": IdentitySpec("overlays/sim", "sim-fleet"),
}

_builds: dict[Path, list[dict[str, Any]]] = {}
_build_lock = asyncio.Lock()


def kustomize_dir() -> Path:
    return repo_root() / "deploy" / "kustomize"


async def kustomize_build(target: str | Path) -> list[dict[str, Any]]:
    """The objects of ``kustomize build <target>`` (a path, or relative to ``deploy/kustomize``); cached
    per process, so treat the result as read-only (``copy.deepcopy`` before changing it)."""
    path = Path(target) if Path(target).is_absolute() else kustomize_dir() / target
    async with _build_lock:
        if path not in _builds:
            kustomize = await ensure_binary("kustomize")
            proc = await asyncio.create_subprocess_exec(
                str(kustomize), "build", str(path),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            out, err = await proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"kustomize build {path} failed:\n{err.decode()}")
            _builds[path] = [doc for doc in yaml.safe_load_all(out) if doc]
    return _builds[path]


# ------------------------------------------------------------------------------ RBAC objects, moved


def _is_subject(subject: dict[str, Any], sa: str) -> bool:
    return (subject.get("kind") == "ServiceAccount" and subject.get("name") == sa
            and subject.get("namespace") in SOURCE_NAMESPACES)


def identity_objects(objs: list[dict[str, Any]], spec: IdentitySpec) -> list[dict[str, Any]]:
    """The ServiceAccount of ``spec`` and every role bound to it in ``objs`` (plus ``also_bind``), with
    bindings narrowed to that one subject; still in their namespace of ``deploy/kustomize``."""
    sa = spec.service_account
    out = [copy.deepcopy(o) for o in objs if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == sa]
    if not out:
        raise LookupError(f"{spec.kustomization} declares no ServiceAccount {sa}")
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("ClusterRole", "Role")}
    wanted: list[tuple[str, str | None, str]] = []
    for binding in objs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(_is_subject(s, sa) for s in binding.get("subjects") or []):
            continue
        binding = copy.deepcopy(binding)
        binding["subjects"] = [s for s in binding["subjects"] if _is_subject(s, sa)]
        out.append(binding)
        ref = binding["roleRef"]
        wanted.append((ref["kind"], binding["metadata"].get("namespace") if ref["kind"] == "Role" else None,
                       ref["name"]))
    for name in spec.also_bind:
        matches = [key for key in roles if key[2] == name]
        if len(matches) != 1:
            raise LookupError(f"{spec.kustomization}: {len(matches)} roles named {name}, want 1")
        kind, namespace, _ = matches[0]
        meta: dict[str, Any] = {"name": f"{name}-{sa}"}
        if namespace:
            meta["namespace"] = namespace
        out.append({
            "apiVersion": f"{RBAC_API}/v1", "kind": "RoleBinding" if kind == "Role" else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": RBAC_API, "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa,
                          "namespace": out[0]["metadata"]["namespace"]}],
        })
        wanted.append(matches[0])
    for key in dict.fromkeys(wanted):
        if key not in roles:
            raise LookupError(f"{spec.kustomization}: {key[0]} {key[2]} is bound to {sa} but not declared")
        out.append(copy.deepcopy(roles[key]))
    return out


def relocate(objs: list[dict[str, Any]], ns: str, suffix: str) -> list[dict[str, Any]]:
    """RBAC objects of a build moved from draflow-system and draflow-node into ``ns``; cluster-scoped names
    and objects of other namespaces suffixed so parallel sessions and other tests never see them. Other
    kinds dropped."""
    out = []
    for src in objs:
        if src["kind"] not in RBAC_KINDS:
            continue
        obj = copy.deepcopy(src)
        meta = obj["metadata"]
        if meta.get("namespace") in SOURCE_NAMESPACES:
            meta["namespace"] = ns
        if obj["kind"] != "ServiceAccount" and meta.get("namespace") != ns:
            meta["name"] = f"{meta['name']}-{suffix}"
        if obj["kind"] == "ClusterRoleBinding" or (obj["kind"] == "RoleBinding" and meta["namespace"] != ns):
            obj["roleRef"]["name"] = f"{obj['roleRef']['name']}-{suffix}"
        for subject in obj.get("subjects", []):
            if subject.get("namespace") in SOURCE_NAMESPACES:
                subject["namespace"] = ns
        out.append(obj)
    return out


# ------------------------------------------------------------------------------ applying and deleting


class Discovery:
    """kind -> (API path prefix, plural, namespaced), from the server's discovery documents."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self._cache: dict[str, dict[str, tuple[str, bool]]] = {}

    async def path(self, obj: dict[str, Any], namespace: str | None = None) -> str:
        api_version = obj["apiVersion"]
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if api_version not in self._cache:
            doc = await self._kube.request("GET", prefix)
            self._cache[api_version] = {
                r["kind"]: (r["name"], r["namespaced"]) for r in doc["resources"] if "/" not in r["name"]
            }
        plural, namespaced = self._cache[api_version][obj["kind"]]
        ns = namespace or obj["metadata"].get("namespace")
        scope = f"/namespaces/{ns}" if namespaced else ""
        return f"{prefix}{scope}/{plural}/{obj['metadata']['name']}"


async def apply(kube: KubeClient, discovery: Discovery, obj: dict[str, Any], *, dry_run: bool = False,
                field_manager: str = FIELD_MANAGER) -> None:
    """Server-side apply of ``obj`` (forced), optionally as a dry run."""
    query: dict[str, Any] = {"fieldManager": field_manager, "force": "true"}
    if dry_run:
        query["dryRun"] = "All"
    await kube.request("PATCH", await discovery.path(obj), body=obj, query=query,
                       content_type="application/apply-patch+yaml")


def apply_order(obj: dict[str, Any]) -> int:
    return {"Namespace": 0, "ServiceAccount": 1, "ClusterRole": 2, "Role": 2}.get(obj["kind"], 3)


async def delete_outside(kube: KubeClient, discovery: Discovery, objs: list[dict[str, Any]], ns: str) -> None:
    """Delete what purging the test namespace leaves: cluster-scoped objects and those of other namespaces."""
    for obj in objs:
        if obj["metadata"].get("namespace") == ns:
            continue
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", await discovery.path(obj))


# ------------------------------------------------------------------------------ the identity


@dataclass
class ServiceIdentity:
    """An installed identity: ``kube`` for in-process service code, ``kubeconfig`` for a subprocess."""

    name: str
    namespace: str
    service_account: str
    kubeconfig: Path
    kube: KubeClient
    node: str | None = None
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_admin(self) -> bool:
        """The admin stand-in the ``[admin]`` run of ``service_identity`` hands out."""
        return not self.service_account

    @property
    def username(self) -> str:
        if self.is_admin:
            return "admin"
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


async def install_identity(
    env: Environment, kube: KubeClient, name: str, namespace: str, *, node: str | None = None,
) -> ServiceIdentity:
    """Install identity ``name`` (a key of ``IDENTITIES``) into ``namespace``; ``node`` for node-bound
    identities (the Node must exist). Undo with ``uninstall_identity``; purging the namespace does the
    rest."""
    spec = IDENTITIES[name]
    if spec.node_bound and not node:
        raise ValueError(f"identity {name} is node-bound: pass node=")
    built = await kustomize_build(spec.kustomization)
    objs = relocate(identity_objects(built, spec), namespace, namespace.rpartition("-")[2])
    discovery = Discovery(kube)
    try:
        for obj in sorted(objs, key=apply_order):
            await apply(kube, discovery, obj)
        if spec.admission:
            for obj in built:
                if obj["kind"] in ADMISSION_KINDS:
                    await apply(kube, discovery, obj)
        bound_pod = None
        if spec.node_bound:
            bound_pod = await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body={
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": f"{spec.service_account}-", "labels": {
                    "draflow.dev/test-identity": spec.service_account}},
                "spec": {"nodeName": node, "serviceAccountName": spec.service_account,
                         "automountServiceAccountToken": False,
                         "containers": [{"name": "identity", "image": "registry.k8s.io/pause:3.10"}]},
            })
        kubeconfig = await env.serviceaccount_kubeconfig(namespace, spec.service_account, bound_pod=bound_pod)
        client = await KubeClient.from_kubeconfig(str(kubeconfig))
    except BaseException:
        await delete_outside(kube, discovery, objs, namespace)
        raise
    identity = ServiceIdentity(name, namespace, spec.service_account, kubeconfig, client, node, objs)
    try:
        await _check_identity(identity)
        if spec.admission:
            await _wait_own_node_policy(identity)
    except BaseException:
        await uninstall_identity(kube, identity)
        raise
    return identity


async def _check_identity(identity: ServiceIdentity) -> None:
    """The API server sees who we meant (SelfSubjectReview): the user, and for a node-bound token the node."""
    review = await identity.kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    user = review["status"]["userInfo"]
    nodes = (user.get("extra") or {}).get(NODE_NAME_EXTRA, [])
    if user["username"] != identity.username or (identity.node and nodes != [identity.node]):
        raise AssertionError(f"identity {identity.name}: the API server sees {user}")


async def _wait_own_node_policy(identity: ServiceIdentity, timeout: float = 30.0) -> None:  # noqa: ASYNC109
    """Wait until the own-node admission policy (the one policy deploy/ declares) is enforced for this
    identity: policies take effect asynchronously, and a test must not pass because it ran before."""
    probe = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"generateName": "identity-probe-"},
             "spec": {"driver": "probe.draflow.dev", "nodeName": f"{identity.node}-other",
                      "pool": {"name": "probe", "generation": 1, "resourceSliceCount": 1}, "devices": []}}
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await identity.kube.request("POST", "/apis/resource.k8s.io/v1/resourceslices", body=probe,
                                        query={"dryRun": "All"})
        except Forbidden:
            return
        except Invalid as exc:
            if "may not write a ResourceSlice" in str(exc):
                return
            raise
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"identity {identity.name}: the own-node admission policy is not enforced "
                                 f"after {timeout}s")
        await asyncio.sleep(0.1)


async def uninstall_identity(kube: KubeClient, identity: ServiceIdentity) -> None:
    """Close its client and delete its objects outside its namespace (cluster roles, bindings elsewhere)."""
    await identity.kube.close()
    await delete_outside(kube, Discovery(kube), identity.objects, identity.namespace)
