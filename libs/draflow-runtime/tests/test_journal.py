"""The append-only journal: records come back in order, a crash at any byte of the last record loses
only that record (with a warning naming it), other epochs' leftovers are never replayed, and waiting
callers share one fdatasync."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draflow_runtime.journal import HEADER, JournalFull, JournalWriter, encode_record, read_records
from draflow_testenv.logcapture import json_logs

SIZE = 4096


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    with json_logs("test") as stream:
        yield stream


def warnings(stream: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, stream.getvalue().splitlines()) if line["level"] == "warning"]


async def _written(path: Path, payloads: list[bytes], epoch: int = 7) -> JournalWriter:
    writer = JournalWriter(path, epoch, size=SIZE)
    for payload in payloads:
        await writer.sync(writer.append(payload))
    return writer


async def test_records_come_back_in_order_from_a_preallocated_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "journal"
    writer = await _written(path, [b"one", b"", b"three" * 50])
    assert path.stat().st_size == SIZE  # preallocated: appends change neither size nor blocks
    replayed = read_records(path, 7)
    assert replayed.records == [b"one", b"", b"three" * 50]
    assert (replayed.end, replayed.next_seq, replayed.torn) == (writer.offset, 4, "")
    assert read_records(tmp_path / "missing", 7).records == []
    writer.close()


async def test_a_crash_at_any_byte_of_the_last_record_loses_only_that_record(
    tmp_path: Path, logs: io.StringIO
) -> None:
    """A write that reached the disk only up to byte ``cut`` (the rest still zeros, or the file cut
    short there) replays the records before it; a partly written record is reported by offset and number."""
    path = tmp_path / "journal"
    writer = await _written(path, [b"first", b"second"])
    start = writer.offset
    await writer.sync(writer.append(b"third record"))
    writer.close()
    full = path.read_bytes()
    end = start + len(encode_record(7, 3, b"third record"))
    for cut in range(start, end + 1):
        for torn in (full[:cut] + bytes(SIZE - cut), full[:cut]):  # the rest zeros / the file short
            path.write_bytes(torn)
            logs.seek(0)
            logs.truncate()
            replayed = read_records(path, 7)
            expected = [b"first", b"second", b"third record"] if cut == end else [b"first", b"second"]
            assert replayed.records == expected, cut
            if cut in (start, end):  # nothing of it written (zeros or the file's end), or all of it
                assert warnings(logs) == [], cut
                continue
            (warning,) = warnings(logs)
            assert warning["event"] == "journal record torn, ignored with everything after it"
            assert (warning["path"], warning["offset"], warning["seq"]) == (str(path), start, 3), cut


async def test_a_flipped_byte_in_a_record_is_a_checksum_mismatch(tmp_path: Path, logs: io.StringIO) -> None:
    path = tmp_path / "journal"
    (await _written(path, [b"first", b"second"])).close()
    raw = bytearray(path.read_bytes())
    second = HEADER.size + len(b"first")
    raw[second + HEADER.size + 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    replayed = read_records(path, 7)
    assert (replayed.records, replayed.torn) == ([b"first"], "checksum mismatch")
    assert [w["offset"] for w in warnings(logs)] == [second]


async def test_records_of_another_epoch_are_never_replayed(tmp_path: Path, logs: io.StringIO) -> None:
    """A restarted file keeps older records beyond the new ones; they belong to another epoch."""
    path = tmp_path / "journal"
    writer = await _written(path, [b"old-1" * 10, b"old-2" * 10, b"old-3"], epoch=7)
    assert read_records(path, 8).records == []
    writer.restart(8)
    assert read_records(path, 7).records == [] and read_records(path, 8).records == []
    await writer.sync(writer.append(b"new"))
    assert read_records(path, 8).records == [b"new"]
    assert read_records(path, 7).records == []
    assert warnings(logs) == []
    writer.close()


async def test_waiting_callers_share_one_fdatasync(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "journal", 1, size=SIZE)
    tickets = [writer.append(f"record {i}".encode()) for i in range(20)]
    await asyncio.gather(*(writer.sync(t) for t in tickets))
    assert (writer.durable, writer.flushes) == (20, 1)
    await writer.sync()  # nothing new: no flush
    assert writer.flushes == 1
    writer.close()


def test_a_record_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "journal", 1, size=SIZE)
    with pytest.raises(JournalFull):
        writer.append(bytes(writer.room() + 1))
    writer.append(bytes(writer.room()))  # exactly fits, with its end mark
    assert writer.offset + HEADER.size == SIZE
    writer.close()
