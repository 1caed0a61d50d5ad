"""The allocation request/reply protocol and how its failures are classified (fake transport)."""

from collections.abc import Mapping

import orjson
import pytest

from claim_controller.allocator import (
    AllocationRefused,
    AllocatorClient,
    AllocatorUnavailable,
    decode_reply,
    encode_request,
)
from draflow_runtime.bus import BusUnavailable, NoResponders, RequestTimeout

POD = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-1"}, "spec": {"nodeName": "n1"}}


class Transport:
    def __init__(self, reply: bytes | Exception) -> None:
        self.reply = reply
        self.sent: list[tuple[str, bytes, float]] = []

    async def request(self, subject: str, data: bytes, timeout: float,  # noqa: ASYNC109
                      headers: Mapping[str, str] | None = None) -> bytes:
        self.sent.append((subject, data, timeout))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_request_names_the_pod_and_its_node() -> None:
    assert orjson.loads(encode_request(POD)) == {"namespace": "ns", "pod": "p", "podUID": "u-1", "node": "n1"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"ok": true, "message": "allocated"}', (True, "allocated")),
        (b'{"ok": false, "message": "no device fits"}', (False, "no device fits")),
        (b'{"ok": true}', (True, "")),
        (b"[1]", (False, "malformed reply from the allocator")),
    ],
)
def test_decode_reply(data: bytes, expected: tuple[bool, str]) -> None:
    assert decode_reply(data) == expected


def test_garbage_reply_is_a_refusal() -> None:
    ok, message = decode_reply(b"not json")
    assert not ok and "malformed" in message


async def test_accepted_request_returns_the_message() -> None:
    transport = Transport(b'{"ok": true, "message": "on its way"}')
    client = AllocatorClient(transport, "draflow.allocator.allocate", 2.0)
    assert await client.allocate(POD) == "on its way"
    assert transport.sent[0][0] == "draflow.allocator.allocate"
    assert transport.sent[0][2] == 2.0


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        (NoResponders("no responders", subject="s"), "no allocator answers"),
        (RequestTimeout("slow", subject="s", timeout=2.0), "did not answer within 2s"),
        (BusUnavailable("not connected", subject="s"), "allocation request failed"),
    ],
)
async def test_unanswered_request_is_unavailable(failure: Exception, words: str) -> None:
    client = AllocatorClient(Transport(failure), "s", 2.0)
    with pytest.raises(AllocatorUnavailable, match=words) as info:
        await client.allocate(POD)
    assert (info.value.pod, info.value.node) == ("ns/p", "n1")


async def test_refusal_carries_the_allocators_message() -> None:
    client = AllocatorClient(Transport(b'{"ok": false, "message": "no device fits on n1"}'), "s", 2.0)
    with pytest.raises(AllocationRefused, match="no device fits on n1"):
        await client.allocate(POD)


async def test_nats_disabled_is_unavailable() -> None:
    with pytest.raises(AllocatorUnavailable, match="disabled"):
        await AllocatorClient(None, "s", 2.0).allocate(POD)
