"""deploy/: every service's RBAC on the real kube-apiserver.

- Each service's RBAC applied for real (renamed into a test namespace), then SubjectAccessReviews: what its
  README and code use is allowed, unrelated verbs are denied. (Each service's own integration tests also
  run under its identity: the ``service_identity`` fixture, ``draflow_testenv.identity``.)
- The five services as processes under exactly this RBAC: test_deploy_rbac_flow.py.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml
from deploy_kit import (
    FIELD_MANAGER,
    NODE_AGENTS,
    OVERLAYS,
    REPO,
    SERVICES,
    env_prefix,
)

from draflow_runtime.kube import KubeClient
from draflow_runtime.shards import lease_names
from draflow_testenv.identity import Discovery, apply, apply_order, delete_outside, relocate
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------------------------------------ RBAC

# What each service's code and README need, (verb, group, resource/subresource, where): "cluster" for
# cluster-scoped resources and ClusterRole grants on namespaced ones (checked in namespace `default`),
# "lease:<name>" for its leader-election Lease in its own namespace, "node-leases" for kube-node-lease.
# resourceclaims/binding is the synthetic check of DRAResourceClaimGranularStatusAuthorization (on since
# 1.36): a status write changing allocation or reservedFor also needs `<verb> resourceclaims/binding`.
Grant = tuple[str, str, str, str]
# Every service: the delegated authentication/authorization of its HTTP endpoints (draflow_runtime.httpauth).
REVIEWS: list[Grant] = [("create", "authentication.k8s.io", "tokenreviews", "cluster"),
                        ("create", "authorization.k8s.io", "subjectaccessreviews", "cluster")]
GRANTS: dict[str, list[Grant]] = {
    "claim-controller": [
        *REVIEWS,
        *[(v, "", "pods", "cluster") for v in ("get", "list", "watch", "delete")],
        ("patch", "", "pods/status", "cluster"),
        ("update", "", "pods/finalizers", "cluster"),
        *[(v, "resource.k8s.io", "resourceclaims", "cluster")
          for v in ("get", "list", "watch", "create", "patch", "delete")],
        ("patch", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        *[(v, "resource.k8s.io", "resourceclaimtemplates", "cluster") for v in ("get", "list", "watch")],
        *[(v, "resource.k8s.io", r, "cluster") for v in ("get", "list", "watch")
          for r in ("resourceslices", "devicetaintrules")],
        ("patch", "resource.k8s.io", "devicetaintrules/status", "cluster"),
        *[(v, "scheduling.k8s.io", "podgroups", "cluster") for v in ("get", "list", "watch", "patch")],
        ("patch", "scheduling.k8s.io", "podgroups/status", "cluster"),
        ("get", "", "nodes", "cluster"),
        ("create", "events.k8s.io", "events", "cluster"), ("patch", "events.k8s.io", "events", "cluster"),
        ("create", "coordination.k8s.io", "leases", "lease:"),
        ("get", "coordination.k8s.io", "leases", "lease:claim-controller"),
        ("update", "coordination.k8s.io", "leases", "lease:claim-controller"),
    ],
    "structured-allocator": [
        *REVIEWS,
        *[(v, "", "pods", "cluster") for v in ("get", "list", "watch")],
        ("create", "", "pods/binding", "cluster"),
        ("patch", "", "pods/status", "cluster"),
        *[(v, "resource.k8s.io", "resourceclaims", "cluster")
          for v in ("get", "list", "watch", "patch", "create", "delete")],
        ("update", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("update", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        *[(v, "resource.k8s.io", r, "cluster") for v in ("get", "list", "watch")
          for r in ("resourceslices", "deviceclasses", "devicetaintrules")],
        *[(v, "resource.k8s.io", "resourcepoolstatusrequests", "cluster")
          for v in ("get", "list", "watch", "delete")],
        ("update", "resource.k8s.io", "resourcepoolstatusrequests/status", "cluster"),
        *[(v, "scheduling.k8s.io", "podgroups", "cluster") for v in ("get", "list", "watch")],
        *[(v, "", "nodes", "cluster") for v in ("get", "list", "watch")],
        ("create", "events.k8s.io", "events", "cluster"), ("patch", "events.k8s.io", "events", "cluster"),
        ("create", "coordination.k8s.io", "leases", "lease:"),
        ("update", "coordination.k8s.io", "leases", "lease:structured-allocator"),
    ],
    "slice-publisher": [
        *REVIEWS,
        *[(v, "resource.k8s.io", "resourceslices", "cluster")
          for v in ("get", "list", "watch", "create", "update", "delete")],
        *[(v, "", "nodes", "cluster") for v in ("get", "list", "watch")],
    ],
    "kubelet-dra-shim": [
        *REVIEWS,
        *[(v, "", "pods", "cluster") for v in ("get", "list", "watch")],
        *[(v, "resource.k8s.io", "resourceclaims", "cluster") for v in ("get", "list", "watch")],
        ("create", "events.k8s.io", "events", "cluster"), ("patch", "events.k8s.io", "events", "cluster"),
    ],
    "reference-driver": [
        *REVIEWS,
        ("get", "resource.k8s.io", "resourceclaims", "cluster"),
    ],
}
# Verbs a service must not have: each is a plausible mistake (a wider wildcard, a neighbour's job).
DENIED: dict[str, list[Grant]] = {
    "claim-controller": [  # pods delete is granted since device-taint eviction
        ("update", "resource.k8s.io", "devicetaintrules", "cluster"), ("update", "", "nodes", "cluster"),
        ("create", "", "pods/binding", "cluster"), ("create", "resource.k8s.io", "resourceslices", "cluster"),
        ("get", "", "secrets", "cluster"), ("update", "coordination.k8s.io", "leases", "lease:other"),
        ("create", "", "events", "cluster"), ("patch", "", "events", "cluster"),  # events.k8s.io only
        ("update", "scheduling.k8s.io", "podgroups", "cluster"),  # the finalizer is patched
    ],
    "structured-allocator": [
        ("delete", "", "pods", "cluster"), ("update", "", "pods", "cluster"),
        ("create", "resource.k8s.io", "resourceslices", "cluster"), ("get", "", "secrets", "cluster"),
        ("update", "coordination.k8s.io", "leases", "lease:claim-controller"),
        ("update", "resource.k8s.io", "resourceclaims", "cluster"),  # only patched; status is PUT
        ("create", "resource.k8s.io", "resourcepoolstatusrequests", "cluster"),  # users ask, it answers
        ("patch", "scheduling.k8s.io", "podgroups/status", "cluster"),  # kube-scheduler has it, not we
        ("update", "resource.k8s.io", "resourcepoolstatusrequests", "cluster"),
        ("create", "", "events", "cluster"), ("patch", "", "events", "cluster"),  # events.k8s.io only
    ],
    "slice-publisher": [
        ("get", "", "pods", "cluster"), ("update", "resource.k8s.io", "resourceclaims", "cluster"),
        ("create", "", "nodes", "cluster"), ("get", "", "secrets", "cluster"),
        ("patch", "resource.k8s.io", "resourceslices", "cluster"),  # PUT only
        ("deletecollection", "resource.k8s.io", "resourceslices", "cluster"),  # one DELETE at a time
        ("create", "resource.k8s.io", "devicetaintrules", "cluster"),  # cluster-wide: the fleet identity only
    ],
    "kubelet-dra-shim": [
        ("create", "", "nodes", "cluster"), ("delete", "", "pods", "cluster"),
        ("patch", "", "pods", "cluster"), ("patch", "", "pods/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        ("create", "resource.k8s.io", "resourceslices", "cluster"), ("get", "", "secrets", "cluster"),
        ("create", "coordination.k8s.io", "leases", "node-leases"),
        ("create", "", "events", "cluster"), ("patch", "", "events", "cluster"),  # events.k8s.io only
    ],
    "reference-driver": [
        ("watch", "resource.k8s.io", "resourceclaims", "cluster"),
        ("update", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("create", "resource.k8s.io", "resourceslices", "cluster"), ("get", "", "pods", "cluster"),
        ("get", "", "secrets", "cluster"), ("list", "resource.k8s.io", "resourceclaims", "cluster"),
    ],
}
# sim-fleet: the union of the node agents plus the simulated kubelet (Node, node Lease, pod lifecycle).
GRANTS["sim-fleet"] = [
    *GRANTS["slice-publisher"], *GRANTS["kubelet-dra-shim"], *GRANTS["reference-driver"],
    ("get", "", "nodes", "cluster"), ("create", "", "nodes", "cluster"),
    ("patch", "", "nodes/status", "cluster"),
    ("patch", "", "pods", "cluster"), ("delete", "", "pods", "cluster"),
    ("patch", "", "pods/status", "cluster"),
    *[(v, "coordination.k8s.io", "leases", "node-leases") for v in ("create", "patch")],
    # slice-publisher in fleet mode: one DeviceTaintRule for a driver gone from every node
    *[(v, "resource.k8s.io", "devicetaintrules", "cluster") for v in ("list", "create", "delete")],
]
DENIED["sim-fleet"] = [
    ("delete", "", "nodes", "cluster"), ("get", "", "secrets", "cluster"),
    ("create", "resource.k8s.io", "resourceclaims", "cluster"), ("create", "", "pods/binding", "cluster"),
]


VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
API_GROUPS = {
    "pods": "", "nodes": "", "events": "events.k8s.io", "leases": "coordination.k8s.io",
    "tokenreviews": "authentication.k8s.io", "subjectaccessreviews": "authorization.k8s.io",
    "podgroups": "scheduling.k8s.io",
    **{r: "resource.k8s.io" for r in ("resourceclaims", "resourceclaimtemplates", "resourceslices",
                                       "deviceclasses", "devicetaintrules", "resourcepoolstatusrequests")},
}
SIMULATED_KUBELET_ONLY = "simulated kubelet only"


def rbac_section(service: str) -> str:
    """The body of the README's "## RBAC..." section ("" without README or section)."""
    readme = REPO / "services" / service / "README.md"
    text = readme.read_text() if readme.exists() else ""
    section = re.search(r"^## RBAC.*?$(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    return section.group(1) if section else ""


def readme_grants(service: str) -> dict[str, list[Grant]]:
    """What the service's README says it needs, by identity: the service's own, and "sim-fleet" for rows
    marked "simulated kubelet only". Read from the RBAC section's table (| `resource` | verbs | why |) and
    from ClusterRole/Role YAML blocks; prose is not parsed (the GRANTS table covers it)."""
    readme = REPO / "services" / service / "README.md"
    out: dict[str, list[Grant]] = {service: [], "sim-fleet": []}
    if not readme.exists():
        return out
    text = readme.read_text()
    for line in rbac_section(service).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        who = "sim-fleet" if SIMULATED_KUBELET_ONLY in " ".join(cells[2:]) else service
        verbs = [v for v in re.findall(r"[a-z]+", cells[1]) if v in VERBS]
        for resource in re.findall(r"`([a-z/]+)`", cells[0]):
            group = API_GROUPS[resource.split("/")[0]]
            for verb in verbs:
                if resource == "leases":
                    where = "node-leases" if "kube-node-lease" in cells[0] else (
                        "lease:" if verb == "create" else f"lease:{service}")
                else:
                    where = "cluster"
                out[who].append((verb, group, resource, where))
    for block in re.findall(r"```ya?ml\n(.*?)```", text, flags=re.S):
        for doc in yaml.safe_load_all(block):
            if not isinstance(doc, dict) or doc.get("kind") not in ("ClusterRole", "Role"):
                continue
            where = "cluster" if doc["kind"] == "ClusterRole" else "lease:"
            for rule in doc.get("rules", []):
                if rule.get("resourceNames"):
                    continue
                for group in rule.get("apiGroups", [""]):
                    for resource in rule.get("resources", []):
                        out[service].extend((verb, group, resource, where) for verb in rule.get("verbs", []))
    return out


async def can(kube: KubeClient, ns: str, sa: str, grant: Grant) -> bool:
    verb, group, resource, where = grant
    resource, _, subresource = resource.partition("/")
    attrs: dict[str, Any] = {"verb": verb, "group": group, "resource": resource, "subresource": subresource}
    if where.startswith("lease:"):
        attrs["namespace"] = ns
        if where != "lease:":
            attrs["name"] = where.removeprefix("lease:")
    elif where == "node-leases":
        attrs["namespace"] = "kube-node-lease"
    elif resource not in ("nodes", "resourceslices", "deviceclasses", "devicetaintrules",
                          "resourcepoolstatusrequests", "tokenreviews", "subjectaccessreviews") and \
            (resource, subresource) != ("resourceclaims", "binding"):  # the API server checks it cluster-wide
        attrs["namespace"] = "default"
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{ns}:{sa}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
            "resourceAttributes": attrs,
        },
    }
    result = await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(result["status"].get("allowed"))


@pytest.mark.parametrize(("target", "sa"), [*((s, s) for s in SERVICES), ("sim", "sim-fleet")])
async def test_service_account_gets_exactly_what_the_service_needs(
    built: dict[str, list[dict[str, Any]]], kube: KubeClient,
    make_namespace: Callable[..., Awaitable[str]], target: str, sa: str,
) -> None:
    ns = await make_namespace("rbac")
    suffix = ns.rpartition("-")[2]
    objs = relocate(built[target], ns, suffix)
    discovery = Discovery(kube)
    try:
        for obj in sorted(objs, key=apply_order):
            await apply(kube, discovery, obj, field_manager=FIELD_MANAGER)
        if sa in SERVICES:
            wanted = GRANTS[sa] + readme_grants(sa)[sa]
        else:  # the fleet pod: the three node agents' READMEs, simulated-kubelet rows included
            wanted = GRANTS[sa] + [
                g for svc in NODE_AGENTS for rows in readme_grants(svc).values() for g in rows
            ]
        missing = list(wanted)

        async def all_granted() -> bool:
            nonlocal missing
            missing = [g for g in missing if not await can(kube, ns, sa, g)]
            return not missing

        # The RBAC authorizer reads roles from an informer: a fresh grant may take a moment to count.
        with contextlib.suppress(AssertionError):  # the assertion below names what is still missing
            await eventually(all_granted, 10, "every wanted grant allowed", interval=0.2)
        excess = [g for g in DENIED[sa] if await can(kube, ns, sa, g)]
        assert (missing, excess) == ([], [])
    finally:
        await delete_outside(kube, discovery, objs, ns)


def _claim_controller_leases(objs: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """The shard count the build's claim-controller Deployment runs with and the Leases it needs."""
    from claim_controller.settings import Settings

    (deployment,) = [o for o in objs
                     if o["kind"] == "Deployment" and o["metadata"]["name"] == "claim-controller"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    values = {e["name"]: e.get("value") for e in container.get("env") or []}
    prefix = env_prefix("claim-controller")
    shards = int(values.get(prefix + "SHARDS") or 1)
    default_id = Settings.model_fields["leader_election_id"].default
    lease_id = values.get(prefix + "LEADER_ELECTION_ID") or default_id
    return shards, [lease_id, *lease_names(lease_id, shards)]


@pytest.mark.parametrize("target", ["claim-controller", *OVERLAYS])
async def test_claim_controller_rbac_names_every_lease_of_its_configured_shards(
    built: dict[str, list[dict[str, Any]]], kube: KubeClient,
    make_namespace: Callable[..., Awaitable[str]], target: str,
) -> None:
    """The Role grants get/update on Leases by name: it must name each one the Deployment's --shards
    uses (the shards' and the member slots'), and no further one (a name beyond is a shard count the
    controller refuses at start-up: claim_controller.leasecheck)."""
    shards, names = _claim_controller_leases(built[target])
    beyond = lease_names(names[0], shards + 1)
    extra = [beyond[shards], beyond[-1]]  # <id>-shard-<shards>, <id>-member-<shards>
    ns = await make_namespace("leases")
    objs = relocate(built[target], ns, ns.rpartition("-")[2])
    discovery = Discovery(kube)
    try:
        for obj in sorted(objs, key=apply_order):
            await apply(kube, discovery, obj, field_manager=FIELD_MANAGER)
        wanted = [(verb, "coordination.k8s.io", "leases", f"lease:{name}")
                  for name in names for verb in ("get", "update")]
        missing = list(wanted)

        async def all_granted() -> bool:
            nonlocal missing
            missing = [g for g in missing if not await can(kube, ns, "claim-controller", g)]
            return not missing

        with contextlib.suppress(AssertionError):  # the assertion below names what is still missing
            await eventually(all_granted, 10, "every Lease of the shards granted", interval=0.2)
        excess = [n for n in extra if await can(kube, ns, "claim-controller",
                                                 ("update", "coordination.k8s.io", "leases", f"lease:{n}"))]
        assert (missing, excess) == ([], [])
    finally:
        await delete_outside(kube, discovery, objs, ns)


@pytest.mark.parametrize("service", SERVICES)
def test_readme_rbac_tables_parse(service: str) -> None:
    """Guards the parser above: a README that has an RBAC table yields rows (else its check is vacuous)."""
    has_table = re.search(r"^\| `", rbac_section(service), flags=re.M)
    grants = readme_grants(service)
    assert bool(has_table) <= bool(grants[service]), grants
