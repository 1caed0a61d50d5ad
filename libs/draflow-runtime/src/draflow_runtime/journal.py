"""An append-only journal of records on top of a snapshot file: a durable change without rewriting the file.

Rewriting a whole file durably (temp file, fsync, rename) makes the filesystem commit its own journal for
the new inode and the rename, several flushes of the disk; appending a record to a file whose blocks are
already allocated and written costs one data write and one flush (``fdatasync``: the size and the block
map do not change, so no metadata needs flushing). ``bench/durable_write.py`` of kubelet-dra-shim
measures both on this machine. The reference driver journals its checkpoint this way.

File layout: preallocated (zero-filled, fsynced, its directory fsynced) to a fixed size, then records at
increasing offsets, each followed by an all-zero header (the end mark)::

    u32 length | u32 crc32(length, epoch, seq, payload) | u64 epoch | u64 seq | payload

The **epoch** says which snapshot the records apply on top of (the owner stores it in the snapshot), so
records left over from an earlier use of the file are never replayed. :func:`read_records` returns the
records of one epoch in order and stops at the end mark, at a record of another epoch, and at the first
record that is torn (cut short, checksum mismatch, sequence number out of order: what a crash in the
middle of a write leaves); a torn record is ignored with a warning naming the file, the offset and the
sequence number. A record is durable once :meth:`JournalWriter.sync` returned for it; a record written
but not yet synced may or may not be replayed after a crash (its change was never acknowledged).

**Group commit**: :meth:`JournalWriter.append` writes a record (into the page cache; microseconds) and
returns its sequence number; :meth:`JournalWriter.sync` returns once an ``fdatasync`` that started after
that record was written has finished. Callers that wait together share one ``fdatasync``.
"""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .log import get_logger

log = get_logger(__name__)

HEADER = struct.Struct("<IIQQ")  # length, crc32, epoch, seq
_END = bytes(HEADER.size)


class JournalFull(Exception):
    """The record does not fit in the rest of the journal file: switch to a fresh one first."""


def _crc(length: int, rest: bytes | memoryview) -> int:
    return zlib.crc32(rest, zlib.crc32(struct.pack("<I", length)))


def encode_record(epoch: int, seq: int, payload: bytes) -> bytes:
    """One record (header and payload). Pure."""
    rest = struct.pack("<QQ", epoch, seq) + payload
    return struct.pack("<II", len(payload), _crc(len(payload), rest)) + rest


@dataclass
class Replayed:
    """What :func:`read_records` found: the payloads in order, where the next record goes, its number."""

    records: list[bytes] = field(default_factory=list)
    end: int = 0
    next_seq: int = 1
    torn: str = ""  # why reading stopped early at a record of this epoch; "" when it did not


def read_records(path: Path, epoch: int) -> Replayed:
    """The records of ``epoch`` in the journal at ``path`` (none if the file does not exist). Blocking."""
    try:
        data = memoryview(path.read_bytes())
    except FileNotFoundError:
        return Replayed()
    out = Replayed()
    offset = 0
    while offset < len(data):
        if offset + HEADER.size > len(data):  # a header cut short (a file that was not preallocated)
            if any(data[offset:]):
                out.torn = "cut short"
                log.warning(
                    "journal record torn, ignored with everything after it",
                    path=str(path), offset=offset, seq=out.next_seq, epoch=epoch, reason=out.torn,
                )
            break
        length, crc, rec_epoch, rec_seq = HEADER.unpack_from(data, offset)
        if (length, crc, rec_epoch, rec_seq) == (0, 0, 0, 0):
            break  # the end mark, or never written
        body_end = offset + HEADER.size + length
        intact = body_end <= len(data) and _crc(length, data[offset + 8 : body_end]) == crc
        if intact and rec_epoch != epoch:
            break  # left over from an earlier use of the file
        if not intact or rec_seq != out.next_seq:
            out.torn = "cut short" if body_end > len(data) else (
                "checksum mismatch" if not intact else f"sequence number {rec_seq}")
            log.warning(
                "journal record torn, ignored with everything after it",
                path=str(path), offset=offset, seq=out.next_seq, epoch=epoch, reason=out.torn,
            )
            break
        out.records.append(bytes(data[offset + HEADER.size : body_end]))
        offset = body_end
        out.next_seq += 1
    out.end = offset
    return out


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JournalWriter:
    """Appends records of one epoch to one journal file, from ``start`` (where :func:`read_records` ended).

    The file is created (or grown) to ``size`` zero bytes, fsynced with its directory, on first use, so
    a later ``fdatasync`` flushes record data only. Not thread-safe: one event loop; :meth:`append` is
    blocking but short (a ``pwrite`` into the page cache), :meth:`sync` runs ``fdatasync`` in a thread.
    """

    def __init__(self, path: Path, epoch: int, *, size: int, start: int = 0, next_seq: int = 1) -> None:
        self.path = path
        self.epoch = epoch
        self.size = size
        self.offset = start
        self.next_seq = next_seq  # of the next record in this epoch
        self.written = 0  # records appended by this writer (any epoch): what :meth:`sync` counts
        self.durable = 0  # of those, the ones covered by a finished fdatasync
        self.flushes = 0  # fdatasync calls made
        self._fd: int | None = None
        self._lock = asyncio.Lock()
        self.failed: OSError | None = None  # an fdatasync failed: nothing written since may be trusted

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                have = os.fstat(fd).st_size
                if have < self.size:
                    os.pwrite(fd, bytes(self.size - have), have)
                    os.fsync(fd)
                    _fsync_dir(self.path.parent)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def room(self) -> int:
        """Payload bytes the next record may still have."""
        return self.size - self.offset - 2 * HEADER.size

    def append(self, payload: bytes) -> int:
        """Write one record (not yet durable); the ticket to pass to :meth:`sync`. Raises
        :class:`JournalFull` when it does not fit, ``OSError`` when the write fails."""
        if len(payload) > self.room():
            raise JournalFull(f"journal {self.path}: {len(payload)} bytes do not fit")
        fd = self._open()
        record = encode_record(self.epoch, self.next_seq, payload)
        os.pwrite(fd, record + _END, self.offset)
        self.offset += len(record)  # the next record overwrites the end mark
        self.next_seq += 1
        self.written += 1
        return self.written

    async def sync(self, ticket: int | None = None) -> None:
        """Return once the record of ``ticket`` (default: every record written so far) and every one
        before it is durable. Raises ``OSError`` when an ``fdatasync`` failed, then and ever after until
        :meth:`restart` (the kernel may have dropped the pages it could not write)."""
        ticket = self.written if ticket is None else ticket
        async with self._lock:  # one fdatasync at a time; those queued behind it share the next
            if self.failed is not None:
                raise self.failed
            if self.durable >= ticket:
                return
            covered = self.written
            try:
                await asyncio.to_thread(os.fdatasync, self._open())
            except OSError as exc:
                self.failed = exc
                raise
            self.flushes += 1
            self.durable = covered

    def restart(self, epoch: int) -> None:
        """Start the file again from its beginning with records of ``epoch``. Only once a durable
        snapshot covers every record written so far: they count as durable from now on. The old records
        stop being read at once (the end mark written at the start, or the first new record, comes
        first; an old record there has another epoch)."""
        fd = self._open()
        os.pwrite(fd, _END, 0)
        self.epoch = epoch
        self.offset = 0
        self.next_seq = 1
        self.durable = self.written
        self.failed = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
