"""NATS never slows Kubernetes work: a prepare completes while nats-server is stalled (SIGSTOP)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import nats
import pytest
from fakedriver import FakeDriver
from helpers import allocate, claim, device_class, eventually, pod

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import PODS, KubeClient
from draflow_testenv.identity import ServiceIdentity
from kubelet_dra_shim.fleet import Fleet
from kubelet_dra_shim.settings import ShimSettings

DRIVER = "gpu.shimstall.example"


def _settings(root: Path, node: str) -> ShimSettings:
    (root / "boot_id").write_text("b\n")
    return ShimSettings(
        nodes=node, fleet_root=str(root), http_port=0, nats_url="", boot_id_file=str(root / "boot_id"),
        registry_poll_interval=0.1,
    )


@pytest.mark.integration
async def test_a_pod_is_prepared_and_runs_while_nats_is_stalled_and_its_events_arrive_after(
    kube: KubeClient, make_namespace: Any, short_dir: Path, testenv: Any, shim_identity: ServiceIdentity
) -> None:
    """The shim publishes ``prepared`` from inside its per-node prepare. nats-server is SIGSTOPped: the
    connection stays open and no ack ever comes. The bus's ack timeout is long on purpose (a stalled
    server, not a fast failure), so a prepare that waited for NATS would still be waiting when the test
    gives up; the pod must go Running while NATS is still stopped, and the events arrive after SIGCONT."""
    node = f"shims-{uuid.uuid4().hex[:6]}"
    d = short_dir / node
    driver = FakeDriver(DRIVER, d / "plugins_registry", d / "plugins", d / "cdi", kube)
    await driver.start()
    ns = await make_namespace("shims")
    bus = EventBus(testenv.nats_url, name="kubelet-dra-shim-stall-test", publish_timeout=600)
    await lifecycle.ensure_events_stream(bus)
    await bus.start()
    assert await bus.wait_connected(30)
    shim_kube = shim_identity.kube
    fleet = Fleet(_settings(short_dir, node), shim_kube, EventRecorder(shim_kube, "kubelet-dra-shim"),
                  bus, bus=bus)  # as the service: one bus for its events and its nudges
    await fleet.start()
    try:
        cls = await device_class(kube, DRIVER)
        c = await claim(kube, ns, "c", cls)
        await testenv.pause_nats()
        try:
            p = await pod(kube, ns, "p", node, ["c"])
            await allocate(kube, ns, "c", p, node, DRIVER, ["gpu-0"])

            async def running() -> dict[str, Any] | None:
                got = await kube.get(PODS, "p", namespace=ns)
                return got if got["status"].get("phase") == "Running" else None

            await eventually(running, within=60)
            assert driver.spec_path(c["metadata"]["uid"]).exists()
            assert bus.outbox_size >= 1, "the prepared event waits for NATS, the pod does not"
        finally:
            testenv.resume_nats()

        assert await bus.flush(60)
        nc = await nats.connect(testenv.nats_url)
        try:
            timeline = await lifecycle.claim_timeline(nc.jetstream(), ns, "c")
        finally:
            await nc.close()
        assert "prepared" in [lifecycle.kind_name(e.kind) for e in timeline]
    finally:
        testenv.resume_nats()
        await fleet.stop()
        await bus.stop()
        await driver.stop()
