"""Benchmark: what a durable write costs on this machine, for each way a checkpoint could be made durable.

    python services/kubelet-dra-shim/bench/durable_write.py [--dir /tmp] [--rounds 40] [--per-round 50]
                                                            [--record 512] [--file 8192] [--writers 8]

Each option is one acknowledged write (once it returns, the bytes survive a power loss where the option
says so); the options run interleaved (``--per-round`` writes of each, in turn, ``--rounds`` times), so a
noisy neighbour on the shared disk hits them all alike:

- ``rename+fsync+dirsync``: temp file, write, fsync, rename, fsync of the directory (``atomic_write``
  ``durability="full"``, what kubelet-dra-shim's checkpoint uses);
- ``rename+fsync``: the same without the directory fsync (``durability="file"``, the kubelet's checkpoint
  manager and reference-driver's checkpoint: a power loss may bring back the previous file);
- ``rename+fdatasync+dirsync``: fdatasync instead of fsync on the temp file (a new file: its size and
  blocks are flushed either way, so it is as correct as fsync there, and costs about the same);
- ``overwrite O_DSYNC``: rewrite a preallocated file in place with ``O_DSYNC`` (not atomic: a crash may
  tear it; only the raw cost of one synchronous data write);
- ``journal fdatasync``: append a record to a preallocated, zero-filled journal (pwrite + fdatasync: no
  size or block change, so fdatasync flushes the data only);
- ``journal O_DSYNC``: the same journal, opened with ``O_DSYNC`` (pwrite alone is durable);
- ``journal fallocate``: the journal preallocated with ``fallocate`` only (unwritten extents: every
  first write to a block changes metadata, so fdatasync commits the filesystem journal too);
- ``journal grow``: appends that grow the file (the size changes on each, fdatasync flushes it);
- ``group commit xN``: ``--writers`` threads append records to the zero-filled journal at the same time;
  one fdatasync covers every record written before it started; a writer returns once its record is
  covered (latency per record, and flushes per record).

Prints a Markdown table (p50 / p99 / max in ms). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

JOURNAL_SIZE = 4 << 20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_write(target: Path, data: bytes, sync: Callable[[int], None], dirsync: bool) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".probe.", dir=target.parent)
    try:
        os.write(fd, data)
        sync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    if dirsync:
        fsync_dir(target.parent)


class Journal:
    """A preallocated journal file written at increasing offsets (wrapping around)."""

    def __init__(self, path: Path, how: str) -> None:
        flags = os.O_RDWR | os.O_CREAT | (os.O_DSYNC if how == "odsync" else 0)
        self.fd = os.open(path, flags, 0o600)
        self.how = how
        self.offset = 0
        if how in ("fdatasync", "odsync"):
            os.pwrite(self.fd, b"\0" * JOURNAL_SIZE, 0)  # zero-filled: blocks allocated and written
            os.fsync(self.fd)
        elif how == "fallocate":
            os.posix_fallocate(self.fd, 0, JOURNAL_SIZE)
            os.fsync(self.fd)
            self.recreate = path

    def append(self, record: bytes) -> None:
        if self.offset + len(record) > JOURNAL_SIZE:
            self.offset = 0
            if self.how == "grow":
                os.ftruncate(self.fd, 0)
            elif self.how == "fallocate":  # back to unwritten extents, or it turns into the zero-filled case
                os.ftruncate(self.fd, 0)
                os.posix_fallocate(self.fd, 0, JOURNAL_SIZE)
                os.fsync(self.fd)
        os.pwrite(self.fd, record, self.offset)
        self.offset += len(record)
        if self.how != "odsync":
            os.fdatasync(self.fd)


class GroupCommit:
    """Writers append under a lock; one of them flushes for everyone written before its flush began."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(self.fd, b"\0" * JOURNAL_SIZE, 0)
        os.fsync(self.fd)
        self.offset = 0
        self.written = 0  # records written
        self.durable = 0  # records covered by a finished fdatasync
        self.flushing = False
        self.flushes = 0
        self.cond = threading.Condition()

    def append(self, record: bytes) -> None:
        with self.cond:
            if self.offset + len(record) > JOURNAL_SIZE:
                self.offset = 0
            os.pwrite(self.fd, record, self.offset)
            self.offset += len(record)
            self.written += 1
            mine = self.written
            while self.durable < mine:
                if self.flushing:
                    self.cond.wait()
                    continue
                self.flushing = True
                covered = self.written
                self.cond.release()
                try:
                    os.fdatasync(self.fd)
                finally:
                    self.cond.acquire()
                self.flushing = False
                self.flushes += 1
                self.durable = max(self.durable, covered)
                self.cond.notify_all()


def group_burst(gc: GroupCommit, writers: int, per_writer: int, record: bytes, out: list[float]) -> None:
    def run() -> None:
        for _ in range(per_writer):
            t0 = time.perf_counter()
            gc.append(record)
            out.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=run) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--per-round", type=int, default=50)
    parser.add_argument("--record", type=int, default=512, help="journal record bytes (one claim)")
    parser.add_argument("--file", type=int, default=8192, help="whole checkpoint bytes (a node's claims)")
    parser.add_argument("--writers", type=int, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="durable-", dir=args.dir))
    record, whole = b"r" * args.record, b"c" * args.file
    target = root / "checkpoint"
    inplace_fd = os.open(root / "inplace", os.O_RDWR | os.O_CREAT | os.O_DSYNC, 0o600)
    os.pwrite(inplace_fd, whole, 0)
    journals = {how: Journal(root / f"journal-{how}", how)
                for how in ("fdatasync", "odsync", "fallocate", "grow")}
    gc = GroupCommit(root / "journal-group")
    options: dict[str, Callable[[], None]] = {
        "rename+fsync+dirsync (shim today)": lambda: rename_write(target, whole, os.fsync, True),
        "rename+fsync (driver today)": lambda: rename_write(target, whole, os.fsync, False),
        "rename+fdatasync+dirsync": lambda: rename_write(target, whole, os.fdatasync, True),
        "overwrite O_DSYNC (not atomic)": lambda: os.pwrite(inplace_fd, whole, 0) and None,
        "journal fdatasync (zero-filled)": lambda: journals["fdatasync"].append(record),
        "journal O_DSYNC (zero-filled)": lambda: journals["odsync"].append(record),
        "journal fdatasync (fallocate only)": lambda: journals["fallocate"].append(record),
        "journal fdatasync (growing file)": lambda: journals["grow"].append(record),
    }
    samples: dict[str, list[float]] = {name: [] for name in options}
    group_name = f"group commit x{args.writers} (zero-filled journal)"
    samples[group_name] = []
    names = list(options)
    loads = [os.getloadavg()[0]]
    started = time.time()
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            op = options[name]
            for _ in range(args.per_round):
                t0 = time.perf_counter()
                op()
                samples[name].append(time.perf_counter() - t0)
        per_writer = max(1, args.per_round // args.writers)
        group_burst(gc, args.writers, per_writer, record, samples[group_name])
        loads.append(os.getloadavg()[0])
    elapsed = time.time() - started
    print(f"Dir {args.dir} ({root}), {args.rounds} rounds x {args.per_round} writes per option, "
          f"record {args.record} B, whole file {args.file} B; {elapsed:.0f} s; load average "
          f"{min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} CPUs")
    print()
    print("| option | writes | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {len(values)} | {statistics.median(values) * 1000:.2f} | "
              f"{pct(values, 0.99) * 1000:.2f} | {max(values) * 1000:.2f} |")
    print()
    print(f"group commit: {gc.flushes} fdatasync calls for {gc.written} records "
          f"({gc.written / max(1, gc.flushes):.1f} records per flush)")
    for path in root.iterdir():
        path.unlink()
    root.rmdir()


if __name__ == "__main__":
    main()
