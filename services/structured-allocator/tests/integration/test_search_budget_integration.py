"""A claim whose device search explodes (issue 12, defect 6) on the real API server: the pod is told
"search budget exhausted after N steps" (condition + Event) and retried with backoff, while the allocator
keeps scheduling other pods."""

from __future__ import annotations

import pytest
from sa_kit import Kit, eventually

from draflow_runtime.kube import RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES

pytestmark = pytest.mark.integration

COLORS = 6
DEVICES = 48  # 8 per color: 8**6 ways to pick six distinct colors, each failing on the seventh


async def test_pathological_claim_gets_budget_explanation_while_other_pods_schedule(kit: Kit) -> None:
    node = await kit.node("n")
    name = f"{node}-{kit.driver}"
    await kit.kube.create(RESOURCE_SLICES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": kit.driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"color": {"string": f"c{i % COLORS}"}}}
                             for i in range(DEVICES)]}})
    kit.cluster_objects.append((RESOURCE_SLICES, name))
    await kit.device_class_()
    spec = kit.claim_spec(count=COLORS + 1)  # more distinct colors than exist: never fits
    spec["devices"]["constraints"] = [{"requests": ["gpu"], "distinctAttribute": f"{kit.driver}/color"}]
    await kit.kube.create(RESOURCE_CLAIM_TEMPLATES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "hard"},
        "spec": {"spec": spec}}, kit.namespace)
    await kit.template("one-gpu")
    await kit.start(search_steps=20_000)
    await kit.template_pod("hard", "hard")
    message = await kit.wait_condition("hard", "search budget exhausted after 20000 steps", timeout=60)
    assert message.startswith("0/"), message

    async def failed_scheduling() -> list[str] | None:
        found = [e["message"] for e in await kit.events("hard") if e["reason"] == "FailedScheduling"]
        return found or None

    assert "search budget exhausted after 20000 steps" in (await eventually(failed_scheduling))[0]
    for i in range(3):  # the allocator keeps serving other pods, the hard one being retried meanwhile
        await kit.template_pod(f"easy{i}", "one-gpu")
        assert await kit.wait_bound(f"easy{i}") == node
    hard_claim = await kit.claim_of("hard")
    assert not (hard_claim.get("status") or {}).get("allocation")
