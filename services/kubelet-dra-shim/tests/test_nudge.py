"""``allocated`` events on NATS nudge the shim: the pod is prepared even while the pods watch lags."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakedriver import FakeDriver
from helpers import allocate, claim, device_class, eventually, pod

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import PODS, KubeClient
from draflow_runtime.workqueue import WorkQueue
from draflow_testenv.identity import ServiceIdentity
from draflow_testenv.wait import consistently
from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.claimevents import Allocated, allocated_target
from kubelet_dra_shim.fleet import Fleet
from kubelet_dra_shim.pods import NodeKey, PodController, PodKey
from kubelet_dra_shim.settings import ShimSettings
from kubelet_dra_shim.simkubelet import CDI_ANNOTATION

DRIVER = "gpu.shimnudge.example"

# --- pure: what an allocated event names ---------------------------------------------------------------

_CLAIM = {
    "metadata": {"namespace": "team-a", "name": "c", "uid": "u1"},
    "status": {
        "allocation": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                ]
            }
        }
    },
}


@pytest.mark.parametrize(
    ("name", "data", "headers", "want"),
    [
        (
            "a JSON body (no publisher sends one; not an event)",
            orjson.dumps({"claimUID": "u1", "pod": "team-a/p", "node": "node-1", "devices": []}),
            None,
            None,
        ),
        (
            "lifecycle protobuf, node from the allocation",
            lifecycle.build_claim_event("allocated", _CLAIM, pod="team-a/p").SerializeToString(),
            {lifecycle.EVENT_TYPE_HEADER: "draflow.events.v1.ClaimEvent"},
            Allocated("team-a", "p", "node-1"),
        ),
        ("no pod named", orjson.dumps({"claimUID": "u1", "node": "node-1"}), None, None),
        ("not an event", b"{not json", None, None),
    ],
)
def test_allocated_target(name: str, data: bytes, headers: Any, want: Allocated | None) -> None:
    assert allocated_target(data, headers) == want, name


class _Cache:
    """The pods cache as the controller reads it (a fixed list; handlers never fire)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self._pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}

    def add_handler(self, handler: Any) -> None:
        pass

    def get(self, key: str) -> dict[str, Any] | None:
        return self._pods.get(key)


def _controller(cached: list[dict[str, Any]]) -> tuple[PodController, WorkQueue]:
    queue = WorkQueue(name="nudge-test")
    managers: dict[str, Any] = {"node-1": object()}
    controller = PodController(_Cache(cached), queue, managers, None, None, kube=object())  # type: ignore[arg-type]
    return controller, queue


def _cached_pod(name: str, node: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": name, "uid": name}, "spec": {"nodeName": node}}


@pytest.mark.parametrize(
    ("name", "cached", "target", "queued"),
    [
        ("not cached yet, our node", [], Allocated("team-a", "p", "node-1"), True),
        ("not cached yet, other node", [], Allocated("team-a", "p", "node-2"), False),
        ("not cached, node unknown", [], Allocated("team-a", "p", ""), False),
        ("cached on our node", [_cached_pod("p", "node-1")], Allocated("team-a", "p", ""), True),
        ("cached on another node", [_cached_pod("p", "node-2")], Allocated("team-a", "p", "node-1"), False),
    ],
)
async def test_an_allocated_event_enqueues_the_pod(
    name: str, cached: list[dict[str, Any]], target: Allocated, queued: bool
) -> None:
    controller, queue = _controller(cached)
    controller.nudge(target.namespace, target.pod, target.node)
    assert (len(queue) == 1) == queued, name
    if queued:
        assert await asyncio.wait_for(queue.get(), 1) == PodKey("team-a", "p")


# --- integration: real apiserver, real nats-server, pods watch stopped ------------------------------------


def _settings(root: Path, node: str, **overrides: Any) -> ShimSettings:
    (root / "boot_id").write_text("b\n")
    values: dict[str, Any] = {
        "nodes": node,
        "fleet_root": str(root),
        "http_port": 0,
        "nats_url": "",
        "boot_id_file": str(root / "boot_id"),
        "registry_poll_interval": 0.1,
        "watch_claims": False,  # only the nudge can tell the shim about the allocation
        "resync_interval": 3600.0,
    }
    values.update(overrides)
    return ShimSettings(**values)


@pytest.mark.integration
async def test_allocated_event_prepares_a_pod_the_lagging_pods_watch_has_not_shown(
    kube: KubeClient, make_namespace: Any, short_dir: Path, nats_url: str, shim_identity: ServiceIdentity
) -> None:
    node = f"shimg-{uuid.uuid4().hex[:6]}"
    d = short_dir / node
    driver = FakeDriver(DRIVER, d / "plugins_registry", d / "plugins", d / "cdi", kube)
    await driver.start()
    ns = await make_namespace("shimg")
    bus = EventBus(nats_url, name="kubelet-dra-shim-nudge-test")
    await lifecycle.ensure_events_stream(bus)
    await bus.start()
    shim_kube = shim_identity.kube
    fleet = Fleet(_settings(short_dir, node), shim_kube, EventRecorder(shim_kube, "kubelet-dra-shim"),
                  bus=bus)
    await fleet.start()
    try:
        await fleet.pods.stop()  # the test seam: the pods watch lags (cache frozen, resumable)
        cls = await device_class(kube, DRIVER)
        c = await claim(kube, ns, "c", cls)
        p = await pod(kube, ns, "p", node, ["c"])
        allocated = await allocate(kube, ns, "c", p, node, DRIVER, ["gpu-0"])
        assert fleet.pods.get(f"{ns}/p") is None

        await lifecycle.publish_claim_event(bus, "allocated", allocated, pod=p)

        async def running() -> dict[str, Any] | None:
            got = await kube.get(PODS, "p", namespace=ns)
            return got if got["status"].get("phase") == "Running" else None

        got = await eventually(running, within=20)
        assert json.loads(got["metadata"]["annotations"][CDI_ANNOTATION])["main"]
        spec = driver.spec_path(c["metadata"]["uid"])
        assert spec.exists()
        assert fleet.pods.get(f"{ns}/p") is None  # still lagging: the live read did it

        # The node sweep must not take the pod the cache does not show for a finished one.
        fleet.queue.add(NodeKey(node))

        def still_prepared() -> bool:
            state = checkpoint.read(short_dir / node / "kubelet" / checkpoint.FILE_NAME)
            return spec.exists() and state is not None and c["metadata"]["uid"] in state.claims

        await consistently(still_prepared, 1.0, "the sweep leaves the pod the cache does not show")
        assert spec.exists()
        state = checkpoint.read(short_dir / node / "kubelet" / checkpoint.FILE_NAME)
        assert state is not None and c["metadata"]["uid"] in state.claims

        # The watch catches up and is the source of truth again: deleting the pod unprepares.
        await fleet.pods.start()
        await eventually(lambda: fleet.pods.get(f"{ns}/p") is not None)
        await kube.delete(PODS, "p", namespace=ns, grace_period_seconds=0)
        await eventually(lambda: not spec.exists())
    finally:
        await fleet.stop()
        await bus.stop()
        await driver.stop()
