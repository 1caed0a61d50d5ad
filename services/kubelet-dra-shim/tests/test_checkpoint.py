"""Checkpoint encoding (pure), the old layout, the boot ID beside the file and the atomic file write.

That the layout is the kubelet's own is proven against the kubelet's code in test_checkpoint_kubelet.py."""

from __future__ import annotations

import asyncio
import zlib
from pathlib import Path

import orjson
import pytest

from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.checkpoint import ClaimInfo, CorruptCheckpoint, NodeCheckpoint, PreparedDevice
from kubelet_dra_shim.claimevents import ClaimEvents
from kubelet_dra_shim.manager import NodeManager
from kubelet_dra_shim.plugins import PluginStore


def _claims() -> dict[str, ClaimInfo]:
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
    return {"uid-1": info}


def test_round_trip_keeps_everything_but_prepared() -> None:
    state = checkpoint.decode(checkpoint.encode(_claims()))
    assert (state.boot_id, state.legacy) == ("", False)
    info = state.claims["uid-1"]
    assert (info.claim_name, info.namespace, info.pod_uids) == ("claim-a", "ns", {"pod-1", "pod-2"})
    assert info.drivers["gpu.example"][0].cdi_device_ids == ["gpu.example/gpu=uid-1-gpu-0"]
    assert info.drivers["nic.example"] == []
    assert info.prepared is False  # after a restart every claim is prepared again once


def test_format_is_the_kubelets_with_crc32_of_data() -> None:
    content = checkpoint.encode(_claims())
    outer = orjson.loads(content)
    assert list(outer) == ["Data", "Checksum"]
    assert outer["Checksum"] == zlib.crc32(outer["Data"].encode())
    data = orjson.loads(outer["Data"])
    assert list(data) == ["kind", "apiVersion", "ClaimInfoStateList"]
    assert (data["kind"], data["apiVersion"]) == ("DRACheckpoint", "checkpoint.dra.kubelet.k8s.io/v1")
    entry = data["ClaimInfoStateList"][0]
    assert list(entry) == ["ClaimUID", "ClaimName", "Namespace", "PodUIDs", "DriverState"]
    assert entry["PodUIDs"] == {"pod-1": {}, "pod-2": {}}
    assert entry["DriverState"]["gpu.example"]["Devices"][0] == {
        "PoolName": "pool",
        "DeviceName": "gpu-0",
        "ShareID": None,
        "RequestNames": ["req"],
        "CDIDeviceIDs": ["gpu.example/gpu=uid-1-gpu-0"],
    }
    assert entry["DriverState"]["nic.example"] == {"Devices": None}  # Go's nil slice; no skipNodeOperations


def test_strings_are_escaped_like_go_encoding_json() -> None:
    info = ClaimInfo("u", 'a<b>&c\u2028\u2029\x01\b"\u00e9', "ns")
    data = orjson.loads(checkpoint.encode({"u": info}))["Data"]
    assert '"ClaimName":"a\\u003cb\\u003e\\u0026c\\u2028\\u2029\\u0001\\b\\"\u00e9"' in data
    assert checkpoint.decode(checkpoint.encode({"u": info})).claims["u"].claim_name == info.claim_name


def test_skip_node_operations_survive_and_are_omitted_when_empty() -> None:
    info = ClaimInfo("u", "c", "ns", drivers={"a": [], "b": []}, skip_node_operations={"a": ["*"]})
    data = orjson.loads(orjson.loads(checkpoint.encode({"u": info}))["Data"])
    assert data["ClaimInfoStateList"][0]["DriverState"] == {
        "a": {"Devices": None, "skipNodeOperations": ["*"]},
        "b": {"Devices": None},
    }
    assert checkpoint.decode(checkpoint.encode({"u": info})).claims["u"].skip_node_operations == {"a": ["*"]}


def _legacy(entries: list[dict[str, object]], boot_id: str = "old-boot") -> bytes:
    data = orjson.dumps(
        {
            "kind": "DRACheckpoint",
            "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
            "BootID": boot_id,
            "Entries": entries,
        }
    )
    return orjson.dumps({"Data": data.decode(), "Checksum": zlib.crc32(data)})


def test_old_entries_layout_is_read_and_marked_legacy() -> None:
    entry = {
        "ClaimUID": "u",
        "ClaimName": "c",
        "Namespace": "ns",
        "PodUIDs": {"p": {}},
        "DriverState": {
            "d": {
                "Devices": [
                    {
                        "PoolName": "p",
                        "DeviceName": "x",
                        "ShareID": None,
                        "RequestNames": [],
                        "CDIDeviceIDs": ["d/x=1"],
                    }
                ]
            }
        },
    }
    state = checkpoint.decode(_legacy([entry]))
    assert (state.legacy, state.boot_id) == (True, "old-boot")
    assert state.claims["u"].pod_uids == {"p"}
    assert state.claims["u"].drivers["d"][0].cdi_device_ids == ["d/x=1"]


def test_boot_id_is_kept_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / checkpoint.FILE_NAME
    checkpoint.write(path, checkpoint.encode(_claims()))
    assert checkpoint.read(path).boot_id == ""  # type: ignore[union-attr]  # a kubelet-written file
    checkpoint.write_boot_id(path, "boot-7")
    assert checkpoint.read(path).boot_id == "boot-7"  # type: ignore[union-attr]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        checkpoint.FILE_NAME,
        checkpoint.FILE_NAME + ".boot_id",
    ]
    path.write_bytes(_legacy([]))  # an old file carries its own boot ID, the one beside it wins
    assert checkpoint.read(path).boot_id == "boot-7"  # type: ignore[union-attr]


def _sealed(claim_list: str) -> bytes:
    data = '{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":%s}'
    return orjson.dumps({"Data": data % claim_list, "Checksum": zlib.crc32((data % claim_list).encode())})


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
        pytest.param(_sealed('[{"ClaimName":"no-uid"}]'), id="claim-without-uid"),
        pytest.param(
            _sealed('[{"ClaimUID":"u","PodUIDs":{},"DriverState":{"d":{"Devices":[{"RequestNames":"r"}]}}}]'),
            id="names-not-a-list",
        ),
    ],
)
def test_corrupt_content_is_an_error_not_an_empty_state(content: bytes) -> None:
    with pytest.raises(CorruptCheckpoint):
        checkpoint.decode(content)


def test_write_atomically_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "state" / checkpoint.FILE_NAME
    checkpoint.write(path, b"one")
    checkpoint.write(path, checkpoint.encode(_claims()))
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


def _manager(state_dir: Path, boot_id: str, *, reprepare: bool = False) -> NodeManager:
    return NodeManager(
        "n",
        state_dir,
        PluginStore(),
        None,
        ClaimEvents(None),
        boot_id=boot_id,  # type: ignore[arg-type]
        reprepare_after_restart=reprepare,
    )


async def test_after_a_reboot_the_old_boot_id_stays_until_every_claim_is_prepared_again(
    tmp_path: Path,
) -> None:
    """Otherwise a crash before the repair would make the next start trust claims a reboot destroyed."""
    path = tmp_path / checkpoint.FILE_NAME
    checkpoint.write(path, checkpoint.encode(_claims()))
    checkpoint.write_boot_id(path, "boot-A")
    manager = _manager(tmp_path, "boot-B")
    await manager.load()
    assert manager.rebooted and not manager.claims["uid-1"].prepared
    await manager._save()  # e.g. a pod recorded before the driver prepared the claim again
    assert checkpoint.read(path).boot_id == "boot-A"  # type: ignore[union-attr]
    manager.claims["uid-1"].prepared = True
    await manager._save()
    assert checkpoint.read(path).boot_id == "boot-B"  # type: ignore[union-attr]


async def test_migrating_an_old_file_keeps_its_boot_id(tmp_path: Path) -> None:
    path = tmp_path / checkpoint.FILE_NAME
    entry = checkpoint.claim_to_json(_claims()["uid-1"])
    path.write_bytes(_legacy([entry], boot_id="boot-A"))
    manager = _manager(tmp_path, "boot-B")
    await manager.load()
    assert manager.rebooted
    state = checkpoint.read(path)
    assert state is not None and not state.legacy and set(state.claims) == {"uid-1"}
    assert state.boot_id == "boot-A"  # a crash now must still look like a reboot on the next start


async def test_same_boot_writes_the_boot_id_with_the_first_save(tmp_path: Path) -> None:
    manager = _manager(tmp_path, "boot-A")
    await manager.load()
    await manager._save()
    assert checkpoint.read(tmp_path / checkpoint.FILE_NAME).boot_id == "boot-A"  # type: ignore[union-attr]


async def test_concurrent_saves_leave_the_newest_claims_on_disk(tmp_path: Path) -> None:
    """Saves started together (prepares of different claims) never leave an older state in the file."""
    path = tmp_path / checkpoint.FILE_NAME
    store = NodeCheckpoint(path, "boot-A")
    claims: dict[str, ClaimInfo] = {}

    async def add_and_save(i: int) -> None:
        await asyncio.sleep(0.001 * (i % 5))
        uid = f"uid-{i:03d}"
        claims[uid] = ClaimInfo(uid, f"c{i}", "ns", pod_uids={f"pod-{i}"}, prepared=True)
        await store.save(claims)
        state = checkpoint.read(path)
        assert state is not None and uid in state.claims, "save returns once its change is on disk"

    await asyncio.gather(*(add_and_save(i) for i in range(40)))
    state = checkpoint.read(path)
    assert state is not None
    assert sorted(state.claims) == sorted(claims)
    assert state.boot_id == "boot-A"
