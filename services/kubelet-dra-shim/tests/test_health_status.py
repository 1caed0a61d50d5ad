"""Which allocatedResourcesStatus the simulated kubelet writes: the pod controller over a recording API
transport (the seam), a fixed pods cache and a fixed prepare outcome."""

from __future__ import annotations

from typing import Any

from draflow_runtime.workqueue import WorkQueue
from kubelet_dra_shim.checkpoint import ClaimInfo, PreparedDevice
from kubelet_dra_shim.manager import PrepareOutcome
from kubelet_dra_shim.pods import PodController, PodKey
from kubelet_dra_shim.simkubelet import SimKubelet

NODE = "node-1"


class _Transport:
    """Records status patches (what the API server would receive)."""

    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []

    async def patch(self, res: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if kw.get("subresource") == "status":
            self.statuses.append(body["status"])
        return body


class _Cache:
    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod

    def add_handler(self, handler: Any) -> None:
        pass

    def get(self, key: str) -> dict[str, Any] | None:
        return self.pod


class _Manager:
    async def prepare_pod(self, pod: dict[str, Any]) -> PrepareOutcome:
        info = ClaimInfo("u", "gpu", "ns", drivers={"d": [PreparedDevice("p", "g0", ["gpu"], ["d/gpu=g0"])]})
        return PrepareOutcome(claims={"gpu": info})


def _pod(phase: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pod-uid", "annotations": {}},
        "spec": {
            "nodeName": NODE,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
        },
        "status": {"phase": phase},
    }


def _health_of(status: dict[str, Any]) -> Any:
    return status["containerStatuses"][0].get("allocatedResourcesStatus")


async def test_every_running_status_write_carries_the_current_health() -> None:
    """containerStatuses is atomic: every Running write carries the health; a reconcile from a cache that
    still says Pending after the Running write does not write the status again."""
    transport = _Transport()
    view = {("d", "p", "g0"): ("Unhealthy", "ecc")}
    cache = _Cache(_pod("Pending"))
    controller = PodController(
        cache,  # type: ignore[arg-type]
        WorkQueue(name="health-status-test"),
        {NODE: _Manager()},  # type: ignore[dict-item]
        None,
        SimKubelet(transport, [NODE]),  # type: ignore[arg-type]
        health_view=lambda node: view,
    )
    want = [
        {
            "name": "claim:gpu",
            "resources": [{"resourceID": "d/gpu=g0", "health": "Unhealthy", "message": "ecc"}],
        }
    ]

    await controller.reconcile(PodKey("ns", "p"))
    await controller.reconcile(PodKey("ns", "p"))  # the cache has not shown the Running status yet
    assert [_health_of(s) for s in transport.statuses] == [want]

    cache.pod = _pod("Running")
    await controller.reconcile(PodKey("ns", "p"))  # unchanged health, already Running: no write
    assert len(transport.statuses) == 1

    view[("d", "p", "g0")] = ("Healthy", "")
    await controller.reconcile(PodKey("ns", "p"))
    assert _health_of(transport.statuses[-1]) == [
        {"name": "claim:gpu", "resources": [{"resourceID": "d/gpu=g0", "health": "Healthy"}]}
    ]
