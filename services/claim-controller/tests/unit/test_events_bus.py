"""Claim lifecycle event subjects and payloads; publishing never fails the caller."""

import orjson

from claim_controller.events_bus import ClaimEvents, payload, subject

CLAIM = {
    "metadata": {
        "namespace": "ns", "name": "p-gpu-abcde", "uid": "c-1",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}],
    },
    "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
}


def test_subject() -> None:
    assert subject("ns", "c", "created") == "draflow.events.claim.ns.c.created"


def test_payload_names_claim_owner_pod_and_node() -> None:
    body = orjson.loads(payload(CLAIM))
    assert {k: body[k] for k in ("claimUID", "namespace", "name", "pod", "node")} == {
        "claimUID": "c-1", "namespace": "ns", "name": "p-gpu-abcde", "pod": "ns/p", "node": "n1",
    }
    assert isinstance(body["time"], float)


async def test_publish_failures_are_swallowed() -> None:
    sent: list[str] = []

    async def broken(subj: str, data: bytes) -> None:
        sent.append(subj)
        raise RuntimeError("nats is down")

    await ClaimEvents(broken).deleted(CLAIM)
    assert sent == ["draflow.events.claim.ns.p-gpu-abcde.deleted"]


async def test_no_publisher_publishes_nothing() -> None:
    await ClaimEvents(None).created(CLAIM, "ns/p", None)
