"""What one candidate knows of a ``coordination.k8s.io/v1`` Lease, by its own clock (pure, no I/O).

client-go's leader election keeps, per Lease, the record it last read and the local time it first saw
that record (``observedRecord``, ``observedTime``): a holder is presumed alive while its record changed
within ``leaseDurationSeconds`` of that local time, and clocks of two machines are never compared (the
record's ``renewTime`` is only ever compared with the previous record, as part of it). :class:`ObservedLease`
is that pair; :class:`~draflow_runtime.leader.LeaderElector` decides with it, and a
:class:`~draflow_runtime.shards.ShardCoordinator` keeps one per shard Lease that it refreshes every retry
period whether or not it campaigns for the shard (client-go's candidates read the Lease on every retry, so
a takeover happens one lease duration after the holder's last renewal, not after it was first noticed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

__all__ = ["Clock", "ObservedLease"]

Clock = Callable[[], float]


class ObservedLease:
    """The last record seen of one Lease and when (``clock()``) it was first seen as it is.

    ``default_duration`` stands in for a record without ``leaseDurationSeconds``."""

    def __init__(self, default_duration: float, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.default_duration = default_duration
        self.record: bytes | None = None
        self.since = 0.0
        self.holder = ""
        self.duration = default_duration
        self.read = False  # observed at least once
        self.seen_changing = False  # the record changed (or appeared) after the first read

    def observe(self, spec: Mapping[str, Any] | None) -> None:
        """Note the Lease's ``spec`` as read now (None: the Lease does not exist); if the record differs
        from the last one seen, now is when it was first seen."""
        first, self.read = not self.read, True
        if spec is None:
            self.record, self.holder, self.duration = None, "", self.default_duration
            return
        record = orjson.dumps(dict(spec), option=orjson.OPT_SORT_KEYS)
        if record != self.record:
            self.seen_changing = self.seen_changing or not first
            self.record = record
            self.since = self.clock()
        self.holder = spec.get("holderIdentity") or ""
        self.duration = float(spec.get("leaseDurationSeconds") or self.default_duration)

    def valid(self) -> bool:
        """A holder is set and its record changed within its lease duration (own clock)."""
        return bool(self.holder) and self.clock() < self.since + self.duration

    def seen_alive(self) -> bool:
        """:meth:`valid`, and the record was seen to change since the first read: its holder renewed (or
        took it) while this replica watched. A record found on the first read may be a dead holder's
        last one, of any age: it is valid for a lease duration (safe: nobody takes it before), but it
        says nothing of whether its holder is alive."""
        return self.valid() and self.seen_changing

    def held_by_other(self, identity: str) -> bool:
        """Someone other than ``identity`` holds a lease that has not expired: ``identity`` may not take
        it."""
        return self.holder != identity and self.valid()
