"""The claim-by-claim checkpoint encoder gives the kubelet's bytes (those of the pure ``encode``) and
encodes again only the claims named as changed."""

from __future__ import annotations

import copy
from pathlib import Path

from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.checkpoint import ClaimInfo, NodeCheckpoint, PreparedDevice
from kubelet_dra_shim.checkpointjson import ClaimEncoder


def _claims() -> dict[str, ClaimInfo]:
    return {
        "uid-b": ClaimInfo(
            "uid-b", "claim-b", "ns", pod_uids={"pod-2", "pod-1"},
            drivers={
                "gpu.example": [
                    PreparedDevice("pool", "gpu-0", ["req"], ["gpu.example/gpu=uid-b-gpu-0"], "s1")],
                "nic.example": [],
            },
            skip_node_operations={"nic.example": ["*"]},
        ),
        # Every escape the kubelet's Go encoder writes, inside Data and again inside the file's string.
        "uid-a": ClaimInfo("uid-a", 'a<b>&c\u2028\u2029\x01\b"\\\u00e9', "n\ts", pod_uids={"p"},
                           drivers={"d": [PreparedDevice("p\"l", "d\\v", [], [], None)]}),
    }


def test_encoder_gives_the_bytes_of_encode() -> None:
    claims = _claims()
    encoder = ClaimEncoder()
    assert encoder.encode(claims) == checkpoint.encode(claims)
    assert encoder.encode({}) == checkpoint.encode({})
    assert checkpoint.decode(encoder.encode(claims)).claims.keys() == claims.keys()


def test_encoder_follows_changes_additions_and_removals_it_is_told_of() -> None:
    claims = _claims()
    encoder = ClaimEncoder()
    encoder.encode(claims)
    claims["uid-b"].pod_uids.add("pod-3")
    claims["uid-b"].drivers["nic.example"] = [PreparedDevice("pool", "nic-0", ["r"], ["nic.example/nic=x"])]
    encoder.changed(["uid-b"])
    claims["uid-c"] = ClaimInfo("uid-c", "claim-c", "ns", pod_uids={"pod-9"}, drivers={"d": []})
    del claims["uid-a"]
    assert encoder.encode(claims) == checkpoint.encode(claims)
    claims["uid-a"] = _claims()["uid-a"]  # back again under the same UID (a new object: named as changed)
    encoder.changed(["uid-a"])
    assert encoder.encode(claims) == checkpoint.encode(claims)


def test_an_unchanged_claim_is_not_encoded_again() -> None:
    """The point of the encoder: a save encodes only the claims it is told changed."""
    claims = _claims()
    encoder = ClaimEncoder()
    before = copy.deepcopy(claims)
    encoder.encode(claims)
    claims["uid-a"].pod_uids.add("not-named-as-changed")
    claims["uid-b"].pod_uids.add("pod-3")
    assert encoder.encode(claims) == checkpoint.encode(before)  # neither was named
    encoder.changed(["uid-b"])
    before["uid-b"].pod_uids.add("pod-3")
    assert encoder.encode(claims) == checkpoint.encode(before)
    encoder.changed(None)
    assert encoder.encode(claims) == checkpoint.encode(claims)


async def test_a_save_without_changed_uids_writes_every_claim_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / checkpoint.FILE_NAME
    store = NodeCheckpoint(path, "boot-A")
    claims = _claims()
    await store.save(claims)
    claims["uid-a"].pod_uids.add("p2")
    await store.save(claims)
    assert path.read_bytes() == checkpoint.encode(claims)
    claims["uid-b"].pod_uids.discard("pod-1")
    await store.save(claims, ["uid-b"])
    assert path.read_bytes() == checkpoint.encode(claims)
