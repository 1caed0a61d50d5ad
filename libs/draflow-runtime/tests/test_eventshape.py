"""eventshape: the API server's limits on events.k8s.io/v1 Events, applied before sending."""

from __future__ import annotations

import pytest

from draflow_runtime.eventshape import event_name, micro_time, new_event, reference, truncate


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("short", 10, "short", id="fits"),
        pytest.param("x" * 10, 10, "x" * 10, id="exactly-the-limit"),
        pytest.param("x" * 11, 10, "xxxxxxx...", id="cut-with-marker"),
        pytest.param("é" * 6, 10, "ééé...", id="bytes-counted-never-half-a-character"),
        pytest.param("aé" * 3, 8, "aéa...", id="cut-inside-a-character-drops-it"),
    ],
)
def test_truncate_to_utf8_bytes(text: str, limit: int, expected: str) -> None:
    assert truncate(text, limit) == expected
    assert len(truncate(text, limit).encode()) <= limit


@pytest.mark.parametrize(
    ("name", "uuid_expected"),
    [
        pytest.param("pod-1", False, id="client-go-style"),
        pytest.param("a" * 236, False, id="long-but-fits"),
        pytest.param("a" * 250, True, id="too-long"),
        pytest.param("Upper_Case", True, id="not-a-dns-subdomain"),
    ],
)
def test_event_name(name: str, uuid_expected: bool) -> None:
    got = event_name(name, 0x18EB0AAF4C438400)
    if uuid_expected:
        assert len(got) == 36 and got.count("-") == 4
    else:
        assert got == f"{name}.18eb0aaf4c438400"


def test_micro_time() -> None:
    assert micro_time(1_800_000_000.25) == "2027-01-15T08:00:00.250000Z"


def test_new_event_of_a_cluster_scoped_object_goes_to_default() -> None:
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1", "uid": "u1"}}
    body = new_event(regarding=reference(node), related=None, type="Warning", reason="R", action="A",
                     note="n", controller="c", instance="i" * 200, now=1_800_000_000.0)
    assert body["metadata"]["namespace"] == "default"
    assert body["regarding"] == {"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "u1"}
    assert len(body["reportingInstance"]) == 128
    assert "related" not in body and "series" not in body
