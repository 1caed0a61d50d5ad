"""The happy path of a pod's claims logs nothing per claim at info level.

A churn profile (py-spy, ``bench/churn.py --allocate --log-level info``) spent 7% of the controller's
event-loop samples on the four info lines each pod's claim wrote (created, deallocated, finalizer
removed, deleted). Upstream's resourceclaim controller logs the same steps at V(4)/V(5); here they are
debug lines, and a user follows a claim by its Events, its trace and its NATS lifecycle events.
"""

from __future__ import annotations

import pytest
from cc_kit import Kit, eventually, pod, template
from opentelemetry.sdk.trace import TracerProvider
from structlog.testing import capture_logs

from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration


async def test_a_pods_claim_from_creation_to_deletion_logs_no_info_line(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    # Traced as in production (valid trace ids): the claim's root is written when it is created.
    await kit.start_controller(tracer_provider=TracerProvider())
    with capture_logs() as logs:
        p = await kit.create(PODS, pod("job", {"gpu": {"resourceClaimTemplateName": "t"}}))

        async def recorded() -> str | None:
            statuses = ((await kit.get(PODS, "job")) or {}).get("status", {}).get("resourceClaimStatuses")
            return statuses[0]["resourceClaimName"] if statuses else None
        name = await eventually(recorded, what="claim recorded")
        await kit.allocate(name, "node-1", p)
        await kit.set_phase("job", "Succeeded")

        async def gone() -> bool:
            return await kit.get(RESOURCE_CLAIMS, name) is None
        await eventually(gone, what="claim deallocated and deleted")

    steps = {e["event"] for e in logs if e["log_level"] == "debug"}
    assert {"claim created", "claim deallocated", "generated claim deleted, its pod is done"} <= steps
    assert [e for e in logs if e["log_level"] == "info"] == []
