"""The real ``claim-controller`` process: leader election, /readyz and /metrics, and a pod's claims from
creation to deletion; like every test here, once as the admin and once with only the RBAC of
deploy/kustomize/base/claim-controller (the ``kit`` fixture's identity)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from cc_kit import Kit, consumer, eventually, http_get, metric, pod, template

from draflow_runtime.kube import LEASES, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_testenv.environment import Environment
from draflow_testenv.servers import free_port

pytestmark = pytest.mark.integration


def argv(kit: Kit, testenv: Environment, port: int, identity: str, *extra: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "claim-controller"),
        "--leader-elect", "--leader-election-namespace", kit.namespace,
        "--namespace", kit.namespace, "--http-port", str(port), "--http-host", "127.0.0.1",
        "--nats-url", testenv.nats_url, "--identity", identity, *extra,
    ]


async def test_service_runs_a_pods_claims_end_to_end(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    port = free_port()
    await run_service(argv(kit, testenv, port, "replica-1"), kubeconfig=kit.identity.kubeconfig,
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
    # kube-controller-manager's two resourceclaim metrics, under draflow's prefix
    assert ('draflow_claim_controller_resourceclaim_creates_total{admin_access="false",owner_api_group="",'
            'owner_api_kind="Pod",status="success"} 1.0') in metrics
    gauge = ('draflow_claim_controller_resource_claims{admin_access="false",allocated="false",'
             'source="resource_claim_template"} 1.0')

    async def in_gauge() -> bool:
        return gauge in (await http_get(base + "/metrics"))[1]
    await eventually(in_gauge, what="the claim in the resource_claims gauge")

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


async def test_only_the_leader_works_and_a_standby_takes_over_when_it_dies(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    timing = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    ports = {"a": free_port(), "b": free_port()}
    first = await run_service(argv(kit, testenv, ports["a"], "replica-a", *timing),
                              kubeconfig=kit.identity.kubeconfig, name="cc-a")

    async def holder() -> str | None:
        lease = await kit.get(LEASES, "claim-controller")
        return (lease or {}).get("spec", {}).get("holderIdentity")
    assert await eventually(holder, what="replica-a leads") == "replica-a"
    await run_service(argv(kit, testenv, ports["b"], "replica-b", *timing),
                      kubeconfig=kit.identity.kubeconfig, name="cc-b")

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
