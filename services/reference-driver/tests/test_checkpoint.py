"""Checkpoint encoding, checksum and atomic save."""

from __future__ import annotations

import json
import zlib

import pytest

from reference_driver import checkpoint
from reference_driver.checkpoint import Checkpoint, CheckpointCorrupted, PreparedClaim, PreparedDevice


def sample() -> Checkpoint:
    device = PreparedDevice(
        request_names=("gpu",), pool_name="node-1", device_name="gpu-0",
        cdi_device_ids=("gpu.draflow.example/gpu=uid-1-gpu-0",), share_id=None,
    )
    shared = PreparedDevice(
        request_names=("shared",), pool_name="node-1", device_name="gpu-1",
        cdi_device_ids=("gpu.draflow.example/gpu=uid-2-gpu-1-s1",), share_id="s1",
    )
    return Checkpoint(node="node-1", prepared_claims={
        "uid-1": PreparedClaim(namespace="ns", name="a", devices=(device,)),
        "uid-2": PreparedClaim(namespace="ns", name="b", devices=(shared,)),
    })


def test_round_trip():
    assert checkpoint.decode(checkpoint.encode(sample())) == sample()


def test_save_and_load_survive_a_restart(tmp_path):
    path = tmp_path / "state" / checkpoint.FILE_NAME
    checkpoint.save(path, sample())
    assert checkpoint.load(path, "node-1") == sample()
    assert sorted(p.name for p in path.parent.iterdir()) == [checkpoint.FILE_NAME]


def test_missing_file_is_an_empty_checkpoint(tmp_path):
    assert checkpoint.load(tmp_path / "nope.json", "node-1") == Checkpoint(node="node-1")


def _tamper(raw: bytes) -> bytes:
    outer = json.loads(raw)
    outer["data"] = outer["data"].replace('"gpu-0"', '"gpu-7"')
    return json.dumps(outer).encode()


def _bump_version(raw: bytes) -> bytes:
    outer = json.loads(raw)
    payload = json.loads(outer["data"])
    payload["apiVersion"] = "checkpoint.reference-driver.draflow.dev/v9"
    data = json.dumps(payload)
    return json.dumps({"data": data, "checksum": zlib.crc32(data.encode())}).encode()


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (_tamper, "checksum mismatch"),
        (lambda raw: raw[: len(raw) // 2], "not a checkpoint envelope"),
        (lambda raw: b'{"data": "{}", "checksum": 1}', "checksum mismatch"),
        (_bump_version, "unknown version"),
    ],
    ids=["edited-data", "torn-file", "wrong-checksum", "unknown-version"],
)
def test_corruption_is_detected(tmp_path, corrupt, reason):
    path = tmp_path / checkpoint.FILE_NAME
    path.write_bytes(corrupt(checkpoint.encode(sample())))
    with pytest.raises(CheckpointCorrupted, match=reason):
        checkpoint.load(path, "node-1")
