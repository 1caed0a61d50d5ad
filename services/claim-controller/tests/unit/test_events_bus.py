"""Claim lifecycle events as protobuf ClaimEvents on the lifecycle subjects; publishing never fails the
caller."""

from typing import Any

from claim_controller.events_bus import ClaimEvents
from draflow_runtime import lifecycle

CLAIM = {
    "metadata": {
        "namespace": "ns", "name": "p-gpu-abcde", "uid": "c-1", "resourceVersion": "7",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}],
    },
    "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
}


class FakeBus:
    """What ``lifecycle.publish_claim_event`` needs of an ``EventBus``."""

    name = "claim-controller"
    enabled = True

    def __init__(self, error: Exception | None = None) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []
        self.error = error

    async def publish(self, subject: str, data: bytes, headers: Any = None, **_: Any) -> bool:
        self.sent.append((subject, data, dict(headers or {})))
        if self.error is not None:
            raise self.error
        return True


def decoded(bus: FakeBus) -> list[tuple[str, lifecycle.ClaimEvent]]:
    out = []
    for subject, data, headers in bus.sent:
        event = lifecycle.decode_payload(subject, data, headers)
        assert isinstance(event, lifecycle.ClaimEvent)
        out.append((subject, event))
    return out


async def test_deallocated_names_claim_owner_pod_and_node() -> None:
    bus = FakeBus()
    await ClaimEvents(bus).deallocated(CLAIM)  # type: ignore[arg-type]
    [(subject, event)] = decoded(bus)
    assert subject == "draflow.events.claim.ns.p-gpu-abcde.deallocated"
    assert lifecycle.kind_name(event.kind) == "deallocated"
    assert (event.claim_uid, event.namespace, event.name, event.node) == ("c-1", "ns", "p-gpu-abcde", "n1")
    assert (event.pod.namespace, event.pod.name, event.pod.uid) == ("ns", "p", "u")
    assert event.service == "claim-controller" and event.HasField("time")


async def test_created_and_reserved_carry_the_pod_and_node() -> None:
    bus = FakeBus()
    events = ClaimEvents(bus)  # type: ignore[arg-type]
    await events.created(CLAIM, "ns/p", None)
    pod = {"metadata": {"namespace": "ns", "name": "bound", "uid": "u2"}}
    await events.reserved(CLAIM, pod, "n2")
    (s1, created), (s2, reserved) = decoded(bus)
    assert s1.endswith(".created") and s2.endswith(".reserved")
    assert created.pod.name == "p" and created.node == "n1"
    assert (reserved.pod.name, reserved.pod.uid, reserved.node) == ("bound", "u2", "n2")


async def test_publish_failures_are_swallowed() -> None:
    bus = FakeBus(RuntimeError("nats is down"))
    await ClaimEvents(bus).deleted(CLAIM)  # type: ignore[arg-type]
    assert [s for s, _, _ in bus.sent] == ["draflow.events.claim.ns.p-gpu-abcde.deleted"]


async def test_no_publisher_publishes_nothing() -> None:
    await ClaimEvents(None).created(CLAIM, "ns/p", None)
    disabled = FakeBus()
    disabled.enabled = False
    await ClaimEvents(disabled).created(CLAIM, "ns/p", None)  # type: ignore[arg-type]
    assert disabled.sent == []
