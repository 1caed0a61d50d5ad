"""``TestCheckpointGetOrCreate/upgraded-structure*`` of kubelet v1.37.1 (``pkg/kubelet/cm/dra/state``)
restated (``kubelet_map.py``): files an older kubelet wrote — without ``RequestNames``, and with an older
``apiVersion`` of the checkpoint group — are read, byte for byte as upstream's test has them (their
checksums included); and the state directory is checked when the shim starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_dra_shim import checkpoint
from kubelet_dra_shim.checkpoint import NodeCheckpoint

_DATA = (r'{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/VERSION\",'
         r'\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":'
         r'\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},'
         r'\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",'
         r'\"DeviceName\":\"dev-1\",\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}')


@pytest.mark.parametrize(("version", "checksum"), [
    pytest.param("v1", 1137250765, id="upgraded-structure"),
    pytest.param("v0", 1284376732, id="upgraded-structure-and-version"),
])
def test_a_file_of_an_older_kubelet_is_read(version: str, checksum: int) -> None:
    data = _DATA.replace("VERSION", version)
    content = ('{"Data":"' + data + '","Checksum":' + str(checksum) + "}").encode()
    state = checkpoint.decode(content)
    assert not state.legacy
    (info,) = state.claims.values()
    assert (info.claim_uid, info.claim_name, info.namespace) == (
        "067798be-454e-4be4-9047-1aa06aea63f7", "example", "default")
    assert info.pod_uids == {"139cdb46-f989-4f17-9561-ca10cfb509a6"}
    (device,) = info.drivers["test-driver.cdi.k8s.io"]
    assert (device.pool_name, device.device_name, device.request_names, device.cdi_device_ids) == (
        "worker-1", "dev-1", [], ["example.com/example=cdi-example"])


async def test_a_state_directory_that_cannot_be_made_fails_the_start_naming_it(tmp_path: Path) -> None:
    """``TestNewManagerImpl/invalid directory path``: kubelet refuses to start its DRA manager; the shim's
    load (at start, before any pod) fails with a CheckpointError naming the directory, rather than every
    prepare failing later."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    store = NodeCheckpoint(blocker / "kubelet" / checkpoint.FILE_NAME, "boot-A")
    with pytest.raises(checkpoint.CheckpointError, match="not-a-directory/kubelet"):
        await store.load()


async def test_a_missing_state_directory_is_made_at_start(tmp_path: Path) -> None:
    """``TestNewManagerImpl/valid directory path``."""
    store = NodeCheckpoint(tmp_path / "node" / "kubelet" / checkpoint.FILE_NAME, "boot-A")
    assert await store.load() is None
    assert (tmp_path / "node" / "kubelet").is_dir()
