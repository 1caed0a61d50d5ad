"""One trace per claim (annotation -> prepare span -> gRPC client span -> driver server span) and the
claim lifecycle events on NATS."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import nats
import pytest
from fakedriver import FakeDriver
from helpers import allocate, claim, device_class, eventually, pod
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import PODS, KubeClient
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION, setup_tracing
from draflow_testenv.identity import ServiceIdentity
from kubelet_dra_shim.fleet import Fleet
from kubelet_dra_shim.settings import ShimSettings

pytestmark = pytest.mark.integration

DRIVER = "gpu.shimobs.example"


def _settings(root: Path, node: str) -> ShimSettings:
    (root / "boot_id").write_text("b\n")
    return ShimSettings(
        nodes=node,
        fleet_root=str(root),
        http_port=0,
        nats_url="",
        boot_id_file=str(root / "boot_id"),
        registry_poll_interval=0.1,
    )


async def test_prepare_continues_the_claims_trace_into_the_driver(
    kube: KubeClient, make_namespace: Any, short_dir: Path, otlp_receiver: Any, shim_identity: ServiceIdentity
) -> None:
    provider = setup_tracing(
        "kubelet-dra-shim",
        exporter=OTLPSpanExporter(endpoint=otlp_receiver.endpoint, insecure=True),
        set_global=False,
    )
    node = f"shimt-{uuid.uuid4().hex[:6]}"
    d = short_dir / node
    driver = FakeDriver(
        DRIVER, d / "plugins_registry", d / "plugins", d / "cdi", kube, tracer_provider=provider
    )
    await driver.start()
    shim_kube = shim_identity.kube
    fleet = Fleet(
        _settings(short_dir, node), shim_kube, EventRecorder(shim_kube, "kubelet-dra-shim"),
        tracer_provider=provider,
    )
    await fleet.start()
    try:
        ns = await make_namespace("shimt")
        trace_id = uuid.uuid4().hex
        cls = await device_class(kube, DRIVER)
        await claim(kube, ns, "c", cls, annotations={TRACEPARENT_ANNOTATION: f"00-{trace_id}-{'ab' * 8}-01"})
        p = await pod(kube, ns, "p", node, ["c"])
        await allocate(kube, ns, "c", p, node, DRIVER, ["gpu-0"])
        await eventually(lambda: _running(kube, ns))
        await asyncio.to_thread(provider.force_flush)  # the receiver is served by this event loop

        async def spans() -> list[Any]:
            got = otlp_receiver.trace(trace_id)
            names = {s.name for s in got}
            return (
                got
                if {"prepare pod", "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"} <= names
                and len(got) >= 3
                else []
            )

        try:
            got = await eventually(spans, within=15)
        except AssertionError:
            seen = [(s.name, s.trace_id, s.parent_span_id) for s in otlp_receiver.spans]
            raise AssertionError(seen) from None
        client = next(
            s for s in got if s.name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
        )
        prepare = next(s for s in got if s.name == "prepare pod")
        assert prepare.parent_span_id == "ab" * 8
        assert client.parent_span_id == prepare.span_id
        server = [s for s in got if s.parent_span_id == client.span_id]
        assert server, [(s.name, s.parent_span_id) for s in got]
    finally:
        await fleet.stop()
        await driver.stop()
        await asyncio.to_thread(provider.shutdown)


async def _running(kube: KubeClient, ns: str) -> bool:
    return (await kube.get(PODS, "p", namespace=ns))["status"].get("phase") == "Running"


async def test_claim_lifecycle_events_are_published(
    kube: KubeClient, make_namespace: Any, short_dir: Path, nats_url: str, shim_identity: ServiceIdentity
) -> None:
    node = f"shimn-{uuid.uuid4().hex[:6]}"
    d = short_dir / node
    driver = FakeDriver(DRIVER, d / "plugins_registry", d / "plugins", d / "cdi", kube)
    await driver.start()
    ns = await make_namespace("shimn")
    nc = await nats.connect(nats_url)
    received: list[Any] = []

    async def on_message(msg: Any) -> None:
        event = lifecycle.decode(msg)
        assert isinstance(event, lifecycle.ClaimEvent)
        received.append((msg.subject, event))

    sub = await nc.subscribe(f"draflow.events.claim.{ns}.>", cb=on_message)
    bus = EventBus(nats_url, name="kubelet-dra-shim-test")
    await lifecycle.ensure_events_stream(bus)
    await bus.start()
    shim_kube = shim_identity.kube
    fleet = Fleet(_settings(short_dir, node), shim_kube, EventRecorder(shim_kube, "kubelet-dra-shim"), bus)
    await fleet.start()
    try:
        cls = await device_class(kube, DRIVER)
        c = await claim(kube, ns, "c", cls)
        p = await pod(kube, ns, "p", node, ["c"])
        await allocate(kube, ns, "c", p, node, DRIVER, ["gpu-0"])
        await eventually(lambda: _running(kube, ns))
        await kube.delete(PODS, "p", namespace=ns, grace_period_seconds=0)

        async def both() -> bool:
            return {m[0].rsplit(".", 1)[1] for m in received} >= {"prepared", "unprepared"}

        await eventually(both)
        prepared = next(event for subj, event in received if subj.endswith(".prepared"))
        assert lifecycle.kind_name(prepared.kind) == "prepared"
        assert prepared.claim_uid == c["metadata"]["uid"]
        assert prepared.node == node
        assert prepared.driver == DRIVER
        assert (prepared.pod.namespace, prepared.pod.name) == (ns, "p")
        assert prepared.devices[0].device == "gpu-0" and prepared.devices[0].driver == DRIVER
        assert prepared.devices[0].cdi_device_ids
        assert prepared.service == "kubelet-dra-shim-test"
        unprepared = next(event for subj, event in received if subj.endswith(".unprepared"))
        assert unprepared.claim_uid == prepared.claim_uid and unprepared.node == node
    finally:
        await fleet.stop()
        await sub.unsubscribe()
        await nc.close()
        await bus.stop()
        await driver.stop()
