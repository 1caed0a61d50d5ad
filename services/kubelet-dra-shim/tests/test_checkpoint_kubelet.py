"""The shim's checkpoint against the kubelet's own checkpoint code (k8s.io/kubernetes v1.37.1).

``hack/kubelet-checkpoint`` is a small Go command around ``pkg/kubelet/cm/dra/state`` (NewCheckpointer,
GetOrCreate, Store), built by ``hack/binaries.sh`` from the Go module cache like the other Go tools. The
tests write with one side and read with the other, real files in both directions.
"""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from draflow_testenv.binaries import repo_root
from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.checkpoint import ClaimInfo, PreparedDevice
from kubelet_dra_shim.claimevents import ClaimEvents
from kubelet_dra_shim.manager import NodeManager
from kubelet_dra_shim.plugins import PluginStore

pytestmark = pytest.mark.integration  # runs the Go-built kubelet-checkpoint tool

# What a kubelet stores: several claims, drivers with and without devices, shared devices, nil lists,
# skipNodeOperations, several pods, and characters Go's encoder escapes.
KUBELET_CLAIMS: list[dict[str, Any]] = [
    {
        "ClaimUID": "067798be-454e-4be4-9047-1aa06aea63f7",
        "ClaimName": "gpu<&>",
        "Namespace": "default",
        "PodUIDs": {"139cdb46-f989-4f17-9561-ca10cfb509a6": {}, "0a0b1c2d-0000-4000-8000-000000000001": {}},
        "DriverState": {
            "gpu.example.com": {
                "Devices": [
                    {
                        "PoolName": "node-1",
                        "DeviceName": "gpu-0",
                        "ShareID": None,
                        "RequestNames": ["gpu"],
                        "CDIDeviceIDs": ["gpu.example.com/gpu=067798be-gpu-0"],
                    },
                    {
                        "PoolName": "node-1",
                        "DeviceName": "gpu-1",
                        "ShareID": "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
                        "RequestNames": ["gpu", "other"],
                        "CDIDeviceIDs": None,
                    },
                ]
            },
            "net.example.com": {"Devices": None, "skipNodeOperations": ["*"]},
        },
    },
    {
        "ClaimUID": "4cf8db2d-06c0-7d70-1a51-e59b25b2c16c",
        "ClaimName": "nic",
        "Namespace": "team-a",
        "PodUIDs": {"139cdb46-f989-4f17-9561-ca10cfb509a6": {}},
        "DriverState": {
            "net.example.com": {
                "Devices": [
                    {
                        "PoolName": "node-1",
                        "DeviceName": "eth1",
                        "ShareID": None,
                        "RequestNames": None,
                        "CDIDeviceIDs": ["net.example.com/nic=eth1"],
                    }
                ],
                "skipNodeOperations": ["NodePrepareResources", "NodeUnprepareResources"],
            }
        },
    },
]


@pytest.fixture(scope="module")
def kubelet_checkpoint() -> Path:
    """The kubelet-checkpoint command (built once per Kubernetes version and source, then cached)."""
    script = repo_root() / "hack" / "binaries.sh"
    subprocess.run([str(script), "ensure", "kubelet-checkpoint"], check=True)
    out = subprocess.run(
        [str(script), "path", "kubelet-checkpoint"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def kubelet_write(tool: Path, path: Path, claims: list[dict[str, Any]]) -> None:
    subprocess.run([str(tool), "write", str(path)], input=orjson.dumps(claims), check=True)


def kubelet_read(tool: Path, path: Path) -> list[dict[str, Any]] | None:
    out = subprocess.run([str(tool), "read", str(path)], check=True, capture_output=True)
    result: list[dict[str, Any]] | None = orjson.loads(out.stdout)
    return result


def _as_kubelet_json(info: ClaimInfo) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(checkpoint.claim_to_json(info)))  # type: ignore[no-any-return]


def test_shim_reads_every_claim_device_and_pod_of_a_kubelet_written_file(
    kubelet_checkpoint: Path, tmp_path: Path
) -> None:
    path = tmp_path / checkpoint.FILE_NAME
    kubelet_write(kubelet_checkpoint, path, KUBELET_CLAIMS)
    state = checkpoint.read(path)
    assert state is not None and not state.legacy and state.boot_id == ""
    assert sorted(state.claims) == sorted(c["ClaimUID"] for c in KUBELET_CLAIMS)
    for want in KUBELET_CLAIMS:
        assert _as_kubelet_json(state.claims[want["ClaimUID"]]) == want
    gpu = state.claims["067798be-454e-4be4-9047-1aa06aea63f7"]
    assert gpu.claim_name == "gpu<&>"
    assert gpu.drivers["gpu.example.com"][1] == PreparedDevice(
        "node-1", "gpu-1", ["gpu", "other"], [], "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
    )
    # Not only the same claims: the very bytes the kubelet's code wrote.
    assert checkpoint.encode(state.claims) == path.read_bytes()


def test_kubelet_reads_every_claim_of_a_shim_written_file(kubelet_checkpoint: Path, tmp_path: Path) -> None:
    claims = {
        "u-1": ClaimInfo(
            "u-1",
            "a",
            "ns",
            pod_uids={"p-2", "p-1"},
            drivers={
                "d.example": [PreparedDevice("pool", "dev-0", ["r"], ["d.example/x=0"], "share-1")],
                "e.example": [],
            },
            prepared=True,
            skip_node_operations={"e.example": ["*"]},
        ),
        "u-2": ClaimInfo(
            "u-2",
            "b",
            "ns2",
            pod_uids={"p-1"},
            drivers={"d.example": [PreparedDevice("pool", "dev-1", [], [])]},
        ),
    }
    path = tmp_path / checkpoint.FILE_NAME
    checkpoint.write(path, checkpoint.encode(claims))
    got = kubelet_read(kubelet_checkpoint, path)
    assert got is not None
    assert sorted(got, key=lambda c: c["ClaimUID"]) == [_as_kubelet_json(claims[u]) for u in sorted(claims)]
    # Stored again by the kubelet's code: byte for byte what the shim wrote.
    rewritten = tmp_path / "again"
    kubelet_write(kubelet_checkpoint, rewritten, got)
    assert rewritten.read_bytes() == path.read_bytes()


def test_empty_checkpoint_is_the_kubelets(kubelet_checkpoint: Path, tmp_path: Path) -> None:
    kubelet_write(kubelet_checkpoint, tmp_path / "k", [])
    assert checkpoint.encode({}) == (tmp_path / "k").read_bytes()


async def test_old_layout_is_migrated_so_the_kubelet_sees_its_claims(
    kubelet_checkpoint: Path, tmp_path: Path
) -> None:
    """A file in draflow's old Entries layout: the kubelet's code reads zero claims from it (the bug);
    loading it in the shim rewrites it in the kubelet's layout, keeping every claim."""
    info = ClaimInfo(
        "u-1",
        "a",
        "ns",
        pod_uids={"p-1"},
        drivers={"d.example": [PreparedDevice("pool", "dev-0", ["r"], ["d.example/x=0"])]},
    )
    data = orjson.dumps(
        {
            "kind": checkpoint.KIND,
            "apiVersion": checkpoint.API_VERSION,
            "BootID": "boot-0",
            "Entries": [checkpoint.claim_to_json(info)],
        }
    )
    path = tmp_path / checkpoint.FILE_NAME
    path.write_bytes(orjson.dumps({"Data": data.decode(), "Checksum": zlib.crc32(data)}))
    assert not kubelet_read(kubelet_checkpoint, path)

    manager = NodeManager("node-1", tmp_path, PluginStore(), None, ClaimEvents(None), boot_id="boot-0")  # type: ignore[arg-type]
    await manager.load()
    assert manager.rebooted is False  # the boot ID the old file carried is still honoured
    assert kubelet_read(kubelet_checkpoint, path) == [_as_kubelet_json(info)]
    assert checkpoint.read(path) is not None and checkpoint.read(path).boot_id == "boot-0"  # type: ignore[union-attr]
