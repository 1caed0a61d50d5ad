"""The prepared claims of one node on disk: a snapshot plus two journals, durable per change in one flush.

Files in the node's state directory::

    checkpoint.json          the snapshot (:mod:`reference_driver.checkpoint`), with its ``journalEpoch`` E
    checkpoint.journal.0/1   records (``draflow_runtime.journal``) of epoch E in file E % 2, and of epoch
                             E + 1 in file (E + 1) % 2: one per prepared or unprepared claim

The claims are the snapshot, then the records of epoch E, then those of epoch E + 1, in order (each
record sets or removes one claim). A change is one record appended to the current journal and
``fdatasync``-ed (:meth:`ClaimStore.sync`; concurrent changes share a flush): the file is preallocated,
so that flush writes the record and nothing else, where rewriting the snapshot durably (temp file,
fsync, rename, fsync of the directory) flushed the filesystem's own journal as well
(``services/kubelet-dra-shim/bench/durable_write.py`` measures both).

Compaction never delays a change: when the current journal is half full, :meth:`ClaimStore.switch`
sends new records to the other file (epoch E + 1) and writes, in the background, the snapshot of the
claims as they are at that moment with ``journalEpoch`` E + 1; the file of epoch E is reused (for
E + 2) only once that snapshot is durable. A crash at any byte leaves a snapshot and records that give
every acknowledged change: a torn record (the one being written) is ignored, with a warning naming it.

Start-up (:meth:`ClaimStore.load`) replays both journals; if they held anything, it writes a snapshot of
the result with a fresh epoch (E + 2) before the driver serves, so it always appends to an empty file.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from draflow_runtime.journal import JournalWriter, read_records
from draflow_runtime.log import get_logger
from reference_driver import checkpoint
from reference_driver.checkpoint import Checkpoint, PreparedClaim

log = get_logger(__name__)

Written = tuple[JournalWriter, int]  # a change appended: the journal and the ticket to wait for

JOURNAL_SIZE = 64 * 1024
"""Bytes of one journal file (zero-filled when first used): a record is about 300 bytes per device, so
a switch (and a snapshot write in the background) every ~100 changes."""


def journal_path(state_dir: Path, epoch: int) -> Path:
    return state_dir / f"checkpoint.journal.{epoch % 2}"


def replay(state_dir: Path, node: str) -> tuple[Checkpoint, bool]:
    """The claims as the snapshot and both journals give them, and whether the journals held anything
    (records or a torn one). Blocking; raises ``CheckpointCorrupted`` (a bad snapshot or record)."""
    path = state_dir / checkpoint.FILE_NAME
    snap = checkpoint.load(path, node)
    claims = dict(snap.prepared_claims)
    found = False
    for epoch in (snap.journal_epoch, snap.journal_epoch + 1):
        jpath = journal_path(state_dir, epoch)
        replayed = read_records(jpath, epoch)
        for raw in replayed.records:
            checkpoint.apply_record(claims, raw, str(jpath))
        found = found or bool(replayed.records or replayed.torn)
    return Checkpoint(node=node, prepared_claims=claims, journal_epoch=snap.journal_epoch), found


class ClaimStore:
    """One node's snapshot and journals. Changes are appended by one task at a time (the caller's node
    lock); :meth:`sync` may be awaited by many at once."""

    def __init__(self, state_dir: Path, node: str, *, journal_size: int = JOURNAL_SIZE) -> None:
        self.state_dir = state_dir
        self.node = node
        self.path = state_dir / checkpoint.FILE_NAME
        self.journal_size = journal_size
        self._writers: dict[int, JournalWriter] = {}  # by file number (epoch % 2)
        self._current: JournalWriter | None = None
        self._snapshot: asyncio.Task[None] | None = None  # the background snapshot of the current epoch

    def load(self) -> Checkpoint:
        """Replay snapshot and journals (see the module docstring). Blocking; call before serving."""
        state, found = replay(self.state_dir, self.node)
        epoch = state.journal_epoch
        if found:
            epoch += 2  # neither file holds records of this epoch: both journals are covered by the snapshot
            state.journal_epoch = epoch
            checkpoint.save(self.path, state)
            log.info("checkpoint journals replayed into a new snapshot", node=self.node,
                     claims=len(state.prepared_claims), epoch=epoch)
        self._current = self._writer(epoch)
        if found:
            self._current.restart(epoch)
        return state

    def _writer(self, epoch: int) -> JournalWriter:
        writer = self._writers.get(epoch % 2)
        if writer is None:
            writer = self._writers[epoch % 2] = JournalWriter(
                journal_path(self.state_dir, epoch), epoch, size=self.journal_size)
        return writer

    @property
    def current(self) -> JournalWriter:
        if self._current is None:
            raise RuntimeError("ClaimStore.load() was not called")
        return self._current

    def needs_switch(self, record: bytes) -> bool:
        """Should :meth:`switch` run before ``record`` is appended (the journal half full, or full)?"""
        return self.current.offset > self.journal_size // 2 or len(record) > self.current.room()

    def append(self, record: bytes) -> Written:
        """Write ``record`` (a pwrite; blocking but short); pass the result to :meth:`sync`."""
        writer = self.current
        return writer, writer.append(record)

    async def sync(self, written: Written | None = None) -> None:
        """Return once the change ``written`` (default: every change so far) is durable. Raises
        ``OSError`` when the flush failed (:meth:`switch` with ``wait`` repairs that)."""
        writer, ticket = written if written is not None else (self.current, None)
        await writer.sync(ticket)

    async def switch(self, claims: Checkpoint, *, wait: bool = False) -> None:
        """Send the next records to the other journal file (epoch + 1) and write the snapshot of
        ``claims`` (every change appended so far) with that epoch, in the background (``wait``: before
        returning; raises ``OSError`` if it fails). Call with no change being appended meanwhile."""
        current = self.current
        try:  # what waits on the records of this epoch must not be told "durable" by the next file's flush
            await current.sync()
        except OSError:
            wait = True  # the snapshot below covers them: written before anyone is answered
        if self._snapshot is not None:
            try:
                await self._snapshot  # the other file is reused only once it is covered by a snapshot
            except OSError:  # retried now with the claims as they are (records of its epoch replay onto it)
                await asyncio.to_thread(self._save, claims, current.epoch)
            self._snapshot = None
        epoch = current.epoch + 1
        nxt = self._writer(epoch)
        await asyncio.to_thread(nxt.restart, epoch)
        self._current = nxt
        snap = Checkpoint(node=claims.node, prepared_claims=claims.prepared_claims, journal_epoch=epoch)
        self._snapshot = asyncio.create_task(asyncio.to_thread(self._save, snap, epoch))
        self._snapshot.add_done_callback(self._snapshot_done)
        if wait:
            await self._snapshot

    def _save(self, snap: Checkpoint, epoch: int) -> None:
        checkpoint.save(self.path, Checkpoint(node=snap.node, prepared_claims=snap.prepared_claims,
                                              journal_epoch=epoch))

    def _snapshot_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("checkpoint snapshot failed, retried at the next switch", node=self.node,
                      path=str(self.path), error=str(task.exception()))

    async def close(self) -> None:
        """Wait for a snapshot under way; close the journal files."""
        if self._snapshot is not None:
            with contextlib.suppress(OSError):
                await self._snapshot
        for writer in self._writers.values():
            writer.close()


def claims_after(claims: Checkpoint, uid: str, claim: PreparedClaim | None) -> Checkpoint:
    """``claims`` with ``uid`` set to ``claim`` (``None``: removed): a new object, ``claims`` unchanged."""
    new = {k: v for k, v in claims.prepared_claims.items() if k != uid}
    if claim is not None:
        new[uid] = claim
    return Checkpoint(node=claims.node, prepared_claims=new, journal_epoch=claims.journal_epoch)

