"""The driver's checkpoint as snapshot + journals: every acknowledged prepare and unprepare survives a
SIGKILL at any moment (records not yet compacted, a snapshot being written in the background), and a
torn record is ignored with a warning naming it."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from draflow_runtime.journal import encode_record
from draflow_testenv.logcapture import json_logs
from reference_driver import checkpoint
from reference_driver.inventory import InventoryConfig, build_pool
from reference_driver.state import DeviceState, DriverIdentity
from reference_driver.store import journal_path

DRIVER = "gpu.draflow.example"
NODE = "node-1"
GPUS = 64

# The child: prepares and unprepares claims, printing each acknowledged change, then kills itself with
# SIGKILL (no shutdown, no flush of anything left) right after the last answer.
CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from reference_driver.inventory import InventoryConfig, build_pool
from reference_driver.state import DeviceState, DriverIdentity

root, journal_size, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
pool = build_pool("node-1", InventoryConfig.model_validate({"profile": "plain", "gpu_count": 64}))
devices = {(pool.name, d.name): d for d in pool.devices}

def claim(i):
    uid = f"uid-{i:03d}"
    return uid, {"metadata": {"namespace": "ns", "name": f"c{i}", "uid": uid}, "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.draflow.example", "pool": "node-1",
                                 "device": f"gpu-{i}"}], "config": []}}}}

async def main():
    state = DeviceState(identity=DriverIdentity("gpu.draflow.example", "gpu"), node_name="node-1",
                        cdi_root=root / "cdi", state_dir=root / "state", journal_size=journal_size)
    for i in range(count):
        uid, obj = claim(i)
        await state.prepare(uid, obj, devices)
        print("+" + uid, flush=True)
        if i % 3 == 1:
            await state.unprepare(claim(i - 1)[0])
            print("-" + claim(i - 1)[0], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def new_state(root: Path, journal_size: int = 64 * 1024) -> DeviceState:
    return DeviceState(identity=DriverIdentity(DRIVER, "gpu"), node_name=NODE, cdi_root=root / "cdi",
                       state_dir=root / "state", journal_size=journal_size)


def claim(i: int) -> tuple[str, dict]:
    uid = f"uid-{i:03d}"
    return uid, {"metadata": {"namespace": "ns", "name": f"c{i}", "uid": uid}, "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": f"gpu-{i}"}],
                    "config": []}}}}


def devices() -> dict:
    pool = build_pool(NODE, InventoryConfig.model_validate({"profile": "plain", "gpu_count": GPUS}))
    return {(pool.name, d.name): d for d in pool.devices}


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    with json_logs("test") as stream:
        yield stream


@pytest.mark.parametrize(
    ("journal_size", "count"),
    [(64 * 1024, 6), (2048, 40)],
    ids=["journal-only", "switching-with-snapshots-under-way"],
)
async def test_a_sigkill_after_the_answers_loses_no_acknowledged_change(
    tmp_path: Path, journal_size: int, count: int
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(tmp_path), str(journal_size), str(count),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == -9, err.decode()[-2000:]
    expected: set[str] = set()
    for line in out.decode().split():
        (expected.add if line[0] == "+" else expected.discard)(line[1:])
    assert len(expected) == count - count // 3
    if journal_size == 64 * 1024:  # the snapshot was never rewritten: the journal alone has them
        assert checkpoint.load(tmp_path / "state" / checkpoint.FILE_NAME, NODE).prepared_claims == {}
    restarted = new_state(tmp_path, journal_size)
    assert set(restarted.prepared_claims) == expected
    again = new_state(tmp_path, journal_size)  # start-up compacted the journals into a new snapshot
    assert set(again.prepared_claims) == expected
    assert set(checkpoint.load(tmp_path / "state" / checkpoint.FILE_NAME, NODE).prepared_claims) == expected


async def test_a_torn_record_is_ignored_with_a_log_line_naming_it(tmp_path: Path, logs: io.StringIO) -> None:
    state = new_state(tmp_path)
    for i in range(3):
        await state.prepare(*claim(i), devices())
    start = state.store.current.offset - len(_last_record(state))
    await state.close()
    path = journal_path(tmp_path / "state", 0)
    raw = bytearray(path.read_bytes())
    raw[start + 40 :] = bytes(len(raw) - start - 40)  # the third record's write reached the disk in part
    path.write_bytes(bytes(raw))

    restarted = new_state(tmp_path)
    assert set(restarted.prepared_claims) == {"uid-000", "uid-001"}
    (torn,) = [line for line in map(json.loads, logs.getvalue().splitlines())
               if line["event"] == "journal record torn, ignored with everything after it"]
    assert (torn["path"], torn["offset"], torn["seq"], torn["level"]) == (str(path), start, 3, "warning")
    # The claim whose answer never went out is prepared again as usual, and that survives a restart.
    assert [d.device_name for d in await restarted.prepare(*claim(2), devices())] == ["gpu-2"]
    assert set(new_state(tmp_path).prepared_claims) == {"uid-000", "uid-001", "uid-002"}


def _last_record(state: DeviceState) -> bytes:
    uid, _ = claim(2)
    writer = state.store.current
    return encode_record(writer.epoch, writer.next_seq - 1,
                         checkpoint.record(uid, state.prepared_claims[uid]))


async def test_replaying_many_switches_gives_the_claims_the_driver_had(tmp_path: Path) -> None:
    state = new_state(tmp_path, journal_size=1024)
    for i in range(30):
        await state.prepare(*claim(i), devices())
        if i % 4 == 3:
            await state.unprepare(claim(i - 2)[0])
    before = dict(state.prepared_claims)
    await state.close()
    assert state.store.current.epoch > 5  # it did switch journals many times
    assert new_state(tmp_path, journal_size=1024).prepared_claims == before
