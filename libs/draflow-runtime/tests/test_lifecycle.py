"""Lifecycle events without servers: subjects, escaping, encode/decode, ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.lifecycle import (
    CLAIM_KINDS,
    ClaimEventKind,
    PoolChanged,
    build_claim_event,
    build_pool_changed,
    claim_msg_id,
    claim_subject,
    decode_payload,
    kind_name,
    pool_subject,
    subject_token,
)
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def claim(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team-a",
            "name": "trainer-gpu-x7k2p",
            "uid": "uid-1",
            "resourceVersion": "42",
            "annotations": {TRACEPARENT_ANNOTATION: f"00-{TRACE_ID}-00f067aa0ba902b7-01"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": "pod-uid", "controller": True}
            ],
        },
        "status": status,
    }


ALLOCATED = {
    "allocation": {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.draflow.example", "pool": "node-1", "device": "gpu-0"},
                {"request": "nic", "driver": "nic.example", "pool": "node-1", "device": "eth1",
                 "shareID": "s1"},
            ]
        },
        "nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]},
    }
}


@pytest.mark.parametrize(
    ("name", "token"),
    [
        ("gpu.draflow.example", "gpu_draflow_example"),
        ("node-1", "node-1"),
        ("pool/a.b", "pool_a_b"),
        ("", "_"),
        ("a*b>c d", "a_b_c_d"),
    ],
)
def test_subject_tokens_never_contain_dots_or_wildcards(name: str, token: str) -> None:
    assert subject_token(name) == token


def test_subjects_follow_the_documented_scheme() -> None:
    failed = claim_subject("team-a", "c.1", "prepare_failed")
    assert failed == "draflow.events.claim.team-a.c_1.prepare_failed"
    assert claim_subject("team-a", "c", ClaimEventKind.CLAIM_EVENT_KIND_ALLOCATED).endswith(".c.allocated")
    assert claim_subject("team-a", "c") == "draflow.events.claim.team-a.c.*"
    assert claim_subject("*", "*") == "draflow.events.claim.*.*.*"
    pool = pool_subject("gpu.draflow.example", "node-1")
    assert pool == "draflow.events.pool.gpu_draflow_example.node-1.changed"


def test_every_kind_has_a_subject_token_and_unknown_kinds_are_refused() -> None:
    assert set(CLAIM_KINDS) == {
        "created", "allocated", "allocation_failed", "reserved", "prepared", "prepare_failed",
        "unprepared", "deallocated", "deleted",
    }
    assert kind_name("CLAIM_EVENT_KIND_PREPARE_FAILED") == "prepare_failed"
    assert kind_name(ClaimEventKind.CLAIM_EVENT_KIND_DELETED) == "deleted"
    with pytest.raises(ValueError, match="unknown claim event kind"):
        kind_name("exploded")


def test_claim_event_takes_pod_node_devices_and_trace_from_the_claim() -> None:
    event = build_claim_event("allocated", claim(**ALLOCATED), service="structured-allocator", when=1.5)
    assert event.kind == ClaimEventKind.CLAIM_EVENT_KIND_ALLOCATED
    assert (event.namespace, event.name, event.claim_uid) == ("team-a", "trainer-gpu-x7k2p", "uid-1")
    assert (event.pod.namespace, event.pod.name, event.pod.uid) == ("team-a", "trainer", "pod-uid")
    assert event.node == "node-1"
    assert [(d.driver, d.device, d.share_id) for d in event.devices] == [
        ("gpu.draflow.example", "gpu-0", ""), ("nic.example", "eth1", "s1")
    ]
    assert event.trace_id == TRACE_ID
    assert event.time.ToNanoseconds() == 1_500_000_000
    assert event.resource_version == "42"


def test_explicit_fields_win_and_driver_narrows_the_allocated_devices() -> None:
    event = build_claim_event(
        "prepared", claim(**ALLOCATED), pod="other/p", node="node-9", driver="nic.example"
    )
    assert (event.pod.namespace, event.pod.name, event.node) == ("other", "p", "node-9")
    assert [d.device for d in event.devices] == ["eth1"]
    failed = build_claim_event(
        "prepare_failed", claim(), devices=[{"pool": "p", "device": "gpu-1", "cdiDeviceIDs": ["x=y"]}],
        reason="PrepareFailed", message="boom",
    )
    assert [(d.pool, d.device, list(d.cdi_device_ids)) for d in failed.devices] == [("p", "gpu-1", ["x=y"])]
    assert (failed.reason, failed.message) == ("PrepareFailed", "boom")


def test_the_current_span_is_the_trace_of_the_event() -> None:
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("allocate") as span:
        event = build_claim_event("allocated", claim())
    assert event.trace_id == format(span.get_span_context().trace_id, "032x")


def test_protobuf_round_trip_by_header_and_by_subject() -> None:
    event = build_claim_event("allocation_failed", claim(), message="0/3 nodes are available")
    data = event.SerializeToString()
    subject = claim_subject("team-a", "trainer-gpu-x7k2p", "allocation_failed")
    by_header = decode_payload(subject, data, {lifecycle.EVENT_TYPE_HEADER: "draflow.events.v1.ClaimEvent"})
    assert by_header == event
    assert decode_payload(subject, data) == event
    pool = build_pool_changed(driver="gpu.draflow.example", pool="node-1", node="node-1", generation=3,
                              devices=8, tainted_devices=1, unhealthy_devices=1, resource_slice_count=1)
    decoded = decode_payload(pool_subject("gpu.draflow.example", "node-1"), pool.SerializeToString())
    assert isinstance(decoded, PoolChanged) and decoded == pool


def test_json_bodies_are_not_events() -> None:
    """Every publisher sends protobuf; a JSON body (the format before the protobuf schema) is refused."""
    shim = orjson.dumps({
        "claimUID": "u", "namespace": "ns", "name": "c", "node": "n", "driver": "d",
        "devices": [{"pool": "n", "device": "gpu-0", "cdiDeviceIDs": ["d/gpu=u-gpu-0"]}],
        "pod": "ns/p", "error": "driver said no", "time": 10.0,
    })
    subject = "draflow.events.claim.ns.c.prepare_failed"
    with pytest.raises(ValueError, match=re.escape(f"undecodable event on {subject!r}")):
        decode_payload(subject, shim)
    with pytest.raises(ValueError, match=re.escape("undecodable event on 'draflow.events.pool.d.n.changed'")):
        decode_payload("draflow.events.pool.d.n.changed", orjson.dumps({
            "driver": "d", "node": "n", "pool": "n", "generation": 2, "resourceSliceCount": 1, "devices": 8,
            "taintedDevices": 0, "created": 1, "updated": 0, "deleted": 0, "time": 1.0,
        }))


def test_a_stored_json_message_is_refused_not_dated_by_jetstream() -> None:
    """``decode`` of a JetStream message with a JSON body raises (it used to convert it and take the time
    JetStream stored it); with a type header too."""
    body = orjson.dumps({"claimUID": "u", "pod": "ns/p", "reason": "0/4 nodes are available: ..."})
    stored = SimpleNamespace(timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    for headers in (None, {lifecycle.EVENT_TYPE_HEADER: "draflow.events.v1.ClaimEvent"}):
        msg = SimpleNamespace(subject="draflow.events.claim.ns.c.allocation_failed", data=body,
                              headers=headers, metadata=stored)
        with pytest.raises(ValueError, match="undecodable"):
            lifecycle.decode(msg)


def test_other_subjects_and_garbage_are_value_errors() -> None:
    with pytest.raises(ValueError, match="not a lifecycle event"):
        decode_payload("draflow.allocator.allocate", b"{}")
    with pytest.raises(ValueError, match="undecodable"):
        decode_payload("draflow.events.claim.ns.c.created", b"\xff\xff\xff")


def test_msg_id_is_stable_for_the_same_state_and_differs_otherwise() -> None:
    a = build_claim_event("prepared", claim(**ALLOCATED), when=1.0)
    b = build_claim_event("prepared", claim(**ALLOCATED), when=2.0)
    assert claim_msg_id(a) == claim_msg_id(b), "a retry of the same announcement is de-duplicated"
    other_pod = build_claim_event("prepared", claim(**ALLOCATED), pod="team-a/second")
    unprepared = build_claim_event("unprepared", claim(**ALLOCATED))
    assert len({claim_msg_id(a), claim_msg_id(other_pod), claim_msg_id(unprepared)}) == 3


async def test_announce_never_fails_the_caller() -> None:
    """The services' "publish a claim event, never fail": no bus, a disabled bus and a failing publish
    (here an unknown kind) all give False instead of raising; a good event is queued (True)."""
    bus = EventBus("nats://127.0.0.1:1", name="announce-test")  # never started: publish only queues
    assert await lifecycle.announce_claim_event(None, "created", claim()) is False
    assert await lifecycle.announce_claim_event(EventBus("", name="off"), "created", claim()) is False
    assert await lifecycle.announce_claim_event(bus, "exploded", claim()) is False
    assert bus.outbox_size == 0
    assert await lifecycle.announce_claim_event(bus, "created", claim()) is True
    assert bus.outbox_size == 1
