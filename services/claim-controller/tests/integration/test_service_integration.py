"""The real ``claim-controller`` process: least-privilege RBAC from deploy/rbac.yaml, leader election,
/readyz and /metrics, and a pod's claims from creation to deletion."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cc_kit import Kit, consumer, eventually, pod, template

from draflow_runtime.kube import LEASES, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, Resource
from draflow_testenv.environment import Environment

pytestmark = pytest.mark.integration

RBAC = Path(__file__).parents[2] / "deploy" / "rbac.yaml"
KINDS = {
    "ClusterRole": Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    "ClusterRoleBinding": Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                   "ClusterRoleBinding", False),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def install_rbac(kit: Kit) -> list[tuple[Resource, str]]:
    """deploy/rbac.yaml, moved into the test namespace (cluster-scoped names get a suffix)."""
    created = []
    for doc in yaml.safe_load_all(RBAC.read_text()):
        res = KINDS[doc["kind"]]
        if res.namespaced:
            doc["metadata"]["namespace"] = kit.namespace
        else:
            doc["metadata"]["name"] += f"-{kit.namespace}"
        if doc["kind"].endswith("Binding"):
            doc["subjects"][0]["namespace"] = kit.namespace
            if doc["roleRef"]["kind"] == "ClusterRole":
                doc["roleRef"]["name"] += f"-{kit.namespace}"
        await kit.kube.create(res, doc, kit.namespace if res.namespaced else None)
        if not res.namespaced:
            created.append((res, doc["metadata"]["name"]))
    return created


async def http_get(url: str) -> tuple[int, str]:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.status, await resp.text()
    except aiohttp.ClientError:
        return 0, ""


def argv(kit: Kit, testenv: Environment, port: int, identity: str, *extra: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "claim-controller"),
        "--leader-elect", "--leader-election-namespace", kit.namespace,
        "--namespace", kit.namespace, "--http-port", str(port), "--http-host", "127.0.0.1",
        "--nats-url", testenv.nats_url, "--identity", identity, *extra,
    ]


async def metric(port: int, line_prefix: str) -> float | None:
    _, text = await http_get(f"http://127.0.0.1:{port}/metrics")
    for line in text.splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.split()[-1])
    return None


async def test_service_with_least_privilege_rbac_runs_a_pods_claims_end_to_end(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    cluster_scoped = await install_rbac(kit)
    try:
        kubeconfig = await testenv.serviceaccount_kubeconfig(kit.namespace, "claim-controller")
        port = free_port()
        await run_service(argv(kit, testenv, port, "replica-1"), kubeconfig=kubeconfig,
                          name="claim-controller")
        base = f"http://127.0.0.1:{port}"

        async def ready() -> bool:
            return (await http_get(base + "/readyz"))[0] == 200
        await eventually(ready, what="/readyz")
        assert (await http_get(base + "/healthz"))[0] == 200

        async def leader() -> str | None:
            lease = await kit.get(LEASES, "claim-controller")
            return (lease or {}).get("spec", {}).get("holderIdentity")
        assert await eventually(leader, what="lease held") == "replica-1"

        await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
        p = await kit.create(PODS, pod("app", {"gpu": {"resourceClaimTemplateName": "t"}}))

        async def recorded() -> str | None:
            current = await kit.get(PODS, "app")
            statuses = (current or {}).get("status", {}).get("resourceClaimStatuses") or []
            return statuses[0]["resourceClaimName"] if statuses else None
        name = await eventually(recorded, what="claim recorded in the pod status")

        _, metrics = await http_get(base + "/metrics")
        assert "draflow_claim_controller_claims_created_total 1.0" in metrics
        assert 'draflow_reconcile_duration_seconds_count{name="claim-controller"}' in metrics

        await kit.allocate(name, "node-1", p, device_status=True)
        claim = await kit.get(RESOURCE_CLAIMS, name)
        assert claim is not None and claim["status"]["reservedFor"] == [consumer(p)]
        await kit.set_phase("app", "Succeeded")

        async def claim_gone() -> bool:
            return await kit.get(RESOURCE_CLAIMS, name) is None
        await eventually(claim_gone, what="claim deallocated and deleted")
        _, metrics = await http_get(base + "/metrics")
        assert "draflow_claim_controller_claims_deleted_total 1.0" in metrics
        assert "draflow_claim_controller_claims_deallocated_total 1.0" in metrics
        assert 'draflow_reconcile_errors_total{kind="retryable",name="claim-controller"}' not in metrics \
            or 'kind="retryable",name="claim-controller"} 0.0' in metrics
    finally:
        for res, name in cluster_scoped:
            await kit.kube.delete(res, name)


async def test_only_the_leader_works_and_a_standby_takes_over_when_it_dies(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    timing = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    ports = {"a": free_port(), "b": free_port()}
    first = await run_service(argv(kit, testenv, ports["a"], "replica-a", *timing), name="cc-a")

    async def holder() -> str | None:
        lease = await kit.get(LEASES, "claim-controller")
        return (lease or {}).get("spec", {}).get("holderIdentity")
    assert await eventually(holder, what="replica-a leads") == "replica-a"
    await run_service(argv(kit, testenv, ports["b"], "replica-b", *timing), name="cc-b")

    async def b_ready() -> bool:
        return (await http_get(f"http://127.0.0.1:{ports['b']}/readyz"))[0] == 200
    await eventually(b_ready, what="standby ready")

    await kit.create(PODS, pod("one", {"gpu": {"resourceClaimTemplateName": "t"}}))
    created = "draflow_claim_controller_claims_created_total"

    async def a_created() -> bool:
        return await metric(ports["a"], created) == 1.0
    await eventually(a_created, what="the leader created the claim")
    assert await metric(ports["b"], created) == 0.0  # the standby runs no workers

    await first.kill()  # no lease release: the standby waits for expiry
    async def b_leads() -> bool:
        return await holder() == "replica-b"
    await eventually(b_leads, timeout=30, what="replica-b takes over")
    await kit.create(PODS, pod("two", {"gpu": {"resourceClaimTemplateName": "t"}}))

    async def b_created() -> bool:
        return await metric(ports["b"], created) == 1.0
    await eventually(b_created, what="the new leader created the second claim")
    assert len(await kit.claims()) == 2
