"""The claims kubelet-dra-shim passes to a driver in the gRPC metadata: encoding, budget, bad entries."""

from __future__ import annotations

from draflow_runtime.passedclaims import METADATA_KEY, claims_from_metadata, claims_metadata, reduced


def claim(name: str, uid: str, devices: int = 1) -> dict:
    results = [{"request": "gpu", "driver": "d", "pool": "p", "device": f"gpu-{i}"} for i in range(devices)]
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "7",
                     "managedFields": [{"manager": "x" * 500}]},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": {"allocation": {"devices": {"results": results}}, "reservedFor": [{"name": "p"}]},
    }


def test_claims_round_trip_reduced_to_what_a_driver_reads() -> None:
    entries = claims_metadata([claim("a", "u1"), claim("b", "u2")])
    assert [k for k, _ in entries] == [METADATA_KEY, METADATA_KEY]
    assert all(isinstance(v, bytes) for _, v in entries)
    got = claims_from_metadata([("traceparent", "00-x"), *entries])
    assert got == {"u1": reduced(claim("a", "u1")), "u2": reduced(claim("b", "u2"))}
    assert "managedFields" not in got["u1"]["metadata"] and "reservedFor" not in got["u1"]["status"]
    assert got["u1"]["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_claims_over_the_budget_are_left_for_the_driver_to_read() -> None:
    big, small = claim("big", "u1", devices=200), claim("small", "u2")
    entries = claims_metadata([big, small], budget=1024)
    assert set(claims_from_metadata(entries)) == {"u2"}


def test_entries_that_do_not_decode_are_ignored() -> None:
    bad = [(METADATA_KEY, b"{not json"), (METADATA_KEY, b'{"metadata": {}}'), (METADATA_KEY, b"[]"),
           (METADATA_KEY, b'{"metadata": {"uid": ""}}')]
    assert claims_from_metadata(bad) == {}
    assert claims_from_metadata(None) == {}
