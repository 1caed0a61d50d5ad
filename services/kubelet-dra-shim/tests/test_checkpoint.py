"""Checkpoint encoding (pure) and the atomic file write."""

from __future__ import annotations

import zlib
from pathlib import Path

import orjson
import pytest

from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.checkpoint import CheckpointState, ClaimInfo, CorruptCheckpoint, PreparedDevice


def _state() -> CheckpointState:
    info = ClaimInfo(
        "uid-1",
        "claim-a",
        "ns",
        pod_uids={"pod-2", "pod-1"},
        drivers={
            "gpu.example": [PreparedDevice("pool", "gpu-0", ["req"], ["gpu.example/gpu=uid-1-gpu-0"], None)],
            "nic.example": [],
        },
        prepared=True,
    )
    return CheckpointState(boot_id="boot-1", claims={"uid-1": info})


def test_round_trip_keeps_everything_but_prepared() -> None:
    state = checkpoint.decode(checkpoint.encode(_state()))
    assert state.boot_id == "boot-1"
    info = state.claims["uid-1"]
    assert (info.claim_name, info.namespace, info.pod_uids) == ("claim-a", "ns", {"pod-1", "pod-2"})
    assert info.drivers["gpu.example"][0].cdi_device_ids == ["gpu.example/gpu=uid-1-gpu-0"]
    assert info.drivers["nic.example"] == []
    assert info.prepared is False  # after a restart every claim is prepared again once


def test_format_is_kubelet_like_with_crc32_of_data() -> None:
    outer = orjson.loads(checkpoint.encode(_state()))
    assert set(outer) == {"Data", "Checksum"}
    assert outer["Checksum"] == zlib.crc32(outer["Data"].encode())
    data = orjson.loads(outer["Data"])
    assert data["kind"] == "DRACheckpoint"
    assert data["apiVersion"] == "checkpoint.dra.kubelet.k8s.io/v1"
    entry = data["Entries"][0]
    assert entry["PodUIDs"] == {"pod-1": {}, "pod-2": {}}
    assert entry["DriverState"]["gpu.example"]["Devices"][0] == {
        "PoolName": "pool",
        "DeviceName": "gpu-0",
        "ShareID": None,
        "RequestNames": ["req"],
        "CDIDeviceIDs": ["gpu.example/gpu=uid-1-gpu-0"],
    }


def test_encoding_is_deterministic() -> None:
    assert checkpoint.encode(_state()) == checkpoint.encode(_state())


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"not json", id="garbage"),
        pytest.param(b'{"Data": "{}"}', id="no-checksum"),
        pytest.param(orjson.dumps({"Data": "{}", "Checksum": 1}), id="checksum-mismatch"),
        pytest.param(
            orjson.dumps({"Data": '{"kind":"Other"}', "Checksum": zlib.crc32(b'{"kind":"Other"}')}),
            id="wrong-kind",
        ),
    ],
)
def test_corrupt_content_is_an_error_not_an_empty_state(content: bytes) -> None:
    with pytest.raises(CorruptCheckpoint):
        checkpoint.decode(content)


def test_write_atomically_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "state" / checkpoint.FILE_NAME
    checkpoint.write(path, b"one")
    checkpoint.write(path, checkpoint.encode(_state()))
    assert checkpoint.read(path) is not None
    assert [p.name for p in path.parent.iterdir()] == [checkpoint.FILE_NAME]


def test_read_missing_file_is_none(tmp_path: Path) -> None:
    assert checkpoint.read(tmp_path / "nothing") is None


def test_cdi_ids_follow_the_container_request_filter() -> None:
    info = ClaimInfo(
        "u",
        "c",
        "ns",
        drivers={
            "d": [
                PreparedDevice("p", "a", ["gpu"], ["d/x=a"]),
                PreparedDevice("p", "b", ["nic"], ["d/x=b"]),
                PreparedDevice("p", "c", [], ["d/x=c"]),
            ]
        },
    )
    assert info.cdi_ids_for(None) == ["d/x=a", "d/x=b", "d/x=c"]
    assert info.cdi_ids_for("gpu") == ["d/x=a", "d/x=c"]


def test_boot_id_file_override(tmp_path: Path) -> None:
    f = tmp_path / "boot_id"
    f.write_text("abc\n")
    assert checkpoint.read_boot_id(str(f)) == "abc"
    assert checkpoint.read_boot_id(str(tmp_path / "missing")) == ""
