"""A durable JetStream pull consumer of :class:`draflow_runtime.bus.EventBus` (``bus.pull_consumer``).
Import it from :mod:`draflow_runtime.bus`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import nats.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.client import JetStreamContext

from draflow_runtime.buserrors import _TRANSIENT
from draflow_runtime.log import get_logger

if TYPE_CHECKING:
    from draflow_runtime.bus import EventBus

__all__ = ["PullConsumer"]

log = get_logger("draflow_runtime.bus")


class PullConsumer:
    """A durable JetStream pull consumer; created when NATS is reachable, re-created if it vanishes.

    Messages are nats-py :class:`nats.aio.msg.Msg`: ``.data``, ``.headers`` (use
    :func:`draflow_runtime.tracing.context_from_headers`), ``await .ack()``, ``.nak(delay)``, ``.term()``.
    Ack policy is explicit: a message not acked within ``ack_wait`` is delivered again.
    """

    def __init__(
        self, bus: EventBus, stream: str, durable: str, filter_subject: str, ack_wait: float
    ) -> None:
        self.stream = stream
        self.durable = durable
        self.filter_subject = filter_subject
        self._bus = bus
        self._config = ConsumerConfig(
            durable_name=durable,
            filter_subject=filter_subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
        )
        self._sub: JetStreamContext.PullSubscription | None = None

    async def _subscription(self) -> JetStreamContext.PullSubscription:
        if self._sub is None:
            js = self._bus._jetstream()
            self._sub = await js.pull_subscribe(
                self.filter_subject, durable=self.durable, stream=self.stream, config=self._config
            )
        return self._sub

    async def fetch(self, batch: int = 1, timeout: float = 5.0) -> list[Msg]:  # noqa: ASYNC109
        """Up to ``batch`` messages, waiting at most about ``timeout`` seconds; [] when none arrived or
        NATS is unreachable (never raises for those)."""
        if not await self._bus.wait_connected(timeout):
            return []
        try:
            sub = await self._subscription()
            return await sub.fetch(batch, timeout=timeout)
        except nats.errors.TimeoutError:
            return []
        except _TRANSIENT as exc:
            log.warning(
                "pull consumer fetch failed", stream=self.stream, durable=self.durable, error=repr(exc)
            )
            await self._reset()
            return []

    async def _reset(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def close(self) -> None:
        """Stop pulling; the durable consumer stays on the server."""
        await self._reset()
