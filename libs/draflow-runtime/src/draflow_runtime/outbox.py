"""The bus's bounded FIFO outbox: every published message waits here until NATS has it.

Pure data structure, no I/O: :class:`~draflow_runtime.bus.EventBus` appends in :meth:`Outbox.push` (a
full outbox evicts the oldest message) and its delivery task reads the head with :meth:`Outbox.head`,
removing each message once NATS acknowledged (or refused) it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Outbox", "OutboxMessage"]


@dataclass(frozen=True)
class OutboxMessage:
    """A message waiting for NATS. ``headers`` already carry trace context and ``Nats-Msg-Id``."""

    subject: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    jetstream: bool = True


T = TypeVar("T")


class Outbox(Generic[T]):
    """Bounded FIFO: :meth:`push` on a full outbox evicts and returns the oldest item.

    Items are matched by identity (:meth:`pop_if`, :meth:`discard`), so an item evicted while it was
    being delivered is never confused with an equal newer one.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("outbox size must be at least 1")
        self.maxsize = maxsize
        self._items: deque[T] = deque()

    def push(self, item: T) -> T | None:
        """Append ``item``; return the evicted oldest item if the outbox was full, else None."""
        evicted = self._items.popleft() if len(self._items) >= self.maxsize else None
        self._items.append(item)
        return evicted

    def peek(self) -> T | None:
        """The oldest item, left in place; None when empty."""
        return self._items[0] if self._items else None

    def head(self, n: int) -> list[T]:
        """Up to ``n`` oldest items, oldest first, left in place."""
        return [self._items[i] for i in range(min(n, len(self._items)))]

    def pop_if(self, item: T) -> bool:
        """Remove the oldest item if it is ``item`` (it may have been evicted meanwhile)."""
        if self._items and self._items[0] is item:
            self._items.popleft()
            return True
        return False

    def discard(self, item: T) -> bool:
        """Remove ``item`` wherever it is (usually the head); False if it is no longer there."""
        if self.pop_if(item):
            return True
        for i, other in enumerate(self._items):
            if other is item:
                del self._items[i]
                return True
        return False

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))
