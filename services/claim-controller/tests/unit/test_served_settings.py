"""The features whose API the API server does not serve are turned off at start-up
(``served_settings``): PodGroups not served turn off DRAWorkloadResourceClaims and GenericWorkload, with
one warning naming the gate that mattered. The API server is a local HTTP server answering 404 to every
discovery request (the transport is the seam here)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import structlog
from stub_apiserver import answering

from claim_controller.__main__ import served_settings
from claim_controller.settings import Settings
from draflow_runtime.kube import KubeClient

NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}


@pytest_asyncio.fixture(loop_scope="session")
async def nothing_served() -> AsyncIterator[KubeClient]:
    async with answering({"status": 404, "body": NOT_FOUND}) as kube:
        yield kube


@pytest.mark.parametrize(("gates", "named"), [
    pytest.param("", "DRAWorkloadResourceClaims", id="both-on"),
    pytest.param("DRAWorkloadResourceClaims=false", "GenericWorkload", id="generic-workload-only"),
])
async def test_podgroups_not_served_turn_their_gates_off(nothing_served: KubeClient, gates: str,
                                                         named: str) -> None:
    settings = Settings(http_port=0, nats_url="", feature_gates=gates, device_taint_rules=False)
    assert settings.generic_workload
    with structlog.testing.capture_logs() as logs:
        served = await served_settings(nothing_served, settings)
    assert (served.generic_workload, served.pod_groups) == (False, False)
    assert [e["gate"] for e in logs if e.get("resource") == "podgroups"] == [named]
