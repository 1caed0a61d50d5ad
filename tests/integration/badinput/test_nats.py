"""Garbage on draflow's NATS subjects, from any client of the server: random bodies, wrong and malformed
headers, bodies near the server's payload limit, floods of well-formed events about pods that do not
exist; on the nudge subjects the services subscribe to (``allocated`` claim events: the shim; pool
changes: the allocator), on the allocator's request/reply subject, and stored in the events stream.
Nudges are hints: an unreadable one is dropped; a request gets an answer naming what is wrong; the
history reader skips what it cannot decode; every service keeps serving."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import nats
import pytest
from badinput_kit import Stack
from nats.aio.client import Client

from draflow_runtime import lifecycle

pytestmark = pytest.mark.integration

ALLOCATE = "draflow.allocator.allocate"
CLAIM_TYPE = {lifecycle.EVENT_TYPE_HEADER: lifecycle.CLAIM_EVENT_TYPE}
GARBAGE_HEADERS = [
    None,
    {lifecycle.EVENT_TYPE_HEADER: lifecycle.CLAIM_EVENT_TYPE},  # says protobuf, is not
    {lifecycle.EVENT_TYPE_HEADER: lifecycle.POOL_CHANGED_TYPE},  # the other message type
    {lifecycle.EVENT_TYPE_HEADER: "draflow.events.v9.Nonsense"},
    {"traceparent": "00-not-a-trace-id-01", "tracestate": "\x00\x01garbage"},
    {"traceparent": "ff-" + "f" * 32 + "-" + "f" * 16 + "-ff"},
    {"X-Filler": "y" * 32_000},
]


@pytest.fixture
async def nc(stack: Stack) -> AsyncIterator[Client]:
    client = await nats.connect(stack.flow.testenv.nats_url, connect_timeout=5, allow_reconnect=False)
    try:
        yield client
    finally:
        await client.close()


def _bodies(limit: int) -> list[bytes]:
    return [b"", os.urandom(512), b"{\"kind\": \"allocated\"}", b"\xff" * 64, os.urandom(limit - 64 * 1024)]


async def test_garbage_nudges_are_dropped_and_nothing_stops(stack: Stack, nc: Client) -> None:
    subjects = [
        lifecycle.claim_subject(stack.ns, "nosuch", "allocated"),  # the shim's nudge
        lifecycle.claim_subject("x", "y", "allocated"),
        lifecycle.pool_subject("nosuch.example.com", "pool"),  # the allocator's nudge
    ]
    for subject in subjects:
        for body in _bodies(nc.max_payload):
            for headers in GARBAGE_HEADERS:
                await nc.publish(subject, body, headers=headers)
    await nc.flush()
    await stack.still_serving()


async def test_a_flood_of_well_formed_events_about_nobody_is_absorbed(stack: Stack, nc: Client) -> None:
    """Two thousand "allocated" events naming pods that do not exist (on the flow's nodes and elsewhere)
    and two thousand pool changes: each is a look-again that finds nothing to do."""
    for i in range(2000):
        event = lifecycle.ClaimEvent(kind=lifecycle.ClaimEventKind.Value("CLAIM_EVENT_KIND_ALLOCATED"),
                                     namespace=stack.ns, name=f"ghost-{i}", node=stack.flow.nodes[i % 2],
                                     pod=lifecycle.PodRef(namespace=stack.ns, name=f"ghost-{i}"))
        await nc.publish(lifecycle.claim_subject(stack.ns, f"ghost-{i}", "allocated"),
                         event.SerializeToString(),
                         headers=CLAIM_TYPE)
        await nc.publish(lifecycle.pool_subject("nosuch.example.com", f"p{i}"), b"")
    await nc.flush()
    await stack.still_serving()


def _request(namespace: str, pod: str) -> bytes:
    return json.dumps({"namespace": namespace, "pod": pod, "podUID": "u", "node": "n"}).encode()


@pytest.mark.parametrize(("body", "words"), [
    pytest.param(b"", "malformed request", id="empty"),
    pytest.param(b"\xff\xfe garbage", "malformed request", id="garbage"),
    pytest.param(b"[1, 2, 3]", "malformed request", id="a-list"),
    pytest.param(json.dumps({"namespace": "x"}).encode(), "malformed request", id="missing-fields"),
    pytest.param(None, "malformed request", id="near-the-payload-limit"),
    pytest.param(_request("{ns}", "nosuch"), "not found", id="no-such-pod"),
    pytest.param(_request("{ns}", "../../../api"), "", id="path-in-the-name"),
    pytest.param(_request("kube-system", "p"), "", id="another-namespace"),
])
async def test_allocate_requests_that_make_no_sense_are_answered_with_the_reason(
        stack: Stack, nc: Client, body: bytes | None, words: str) -> None:
    data = os.urandom(nc.max_payload - 64 * 1024) if body is None else \
        body.replace(b"{ns}", stack.ns.encode())
    reply = await nc.request(ALLOCATE, data, timeout=60)
    answer = json.loads(reply.data)
    assert answer["ok"] is False, answer
    assert words in answer["message"], answer
    await stack.still_serving()


async def test_garbage_stored_in_the_events_stream_is_skipped_by_the_history_reader(
        stack: Stack, nc: Client) -> None:
    js = nc.jetstream()
    subject = lifecycle.claim_subject(stack.ns, "storied", "allocated")
    await js.publish(subject, os.urandom(2048), headers=CLAIM_TYPE)
    await js.publish(subject, os.urandom(nc.max_payload - 64 * 1024))
    good = lifecycle.ClaimEvent(kind=lifecycle.ClaimEventKind.Value("CLAIM_EVENT_KIND_CREATED"),
                                namespace=stack.ns, name="storied")
    await js.publish(lifecycle.claim_subject(stack.ns, "storied", "created"), good.SerializeToString(),
                     headers=CLAIM_TYPE)
    timeline = await lifecycle.claim_timeline(js, stack.ns, "storied")
    assert [lifecycle.kind_name(e.kind) for e in timeline if e.kind] == ["created"], timeline
    await stack.still_serving()
