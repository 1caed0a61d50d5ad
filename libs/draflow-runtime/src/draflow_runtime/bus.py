"""The NATS bus: events with trace context, JetStream history, request/reply, and an outbox.

Kubernetes is the truth, NATS only cuts latency and keeps history, so the bus never blocks a service:

- :meth:`EventBus.start` returns even while NATS is down; the first connection is retried forever in the
  background (exponential backoff with jitter, via tenacity); after that nats-py reconnects by itself.
- :meth:`EventBus.publish` never waits for NATS (it runs inside the shim's claim locks, write slots and
  reconciles): it injects the current W3C trace context into the headers, appends the message to a bounded
  FIFO **outbox** (full: the oldest is dropped, counted and logged) and returns. A background task delivers
  the outbox in order, waits for JetStream's acks and retries with backoff while NATS is unreachable or
  stalled; :meth:`EventBus.flush` waits for it. Every JetStream message carries ``Nats-Msg-Id``, so a
  retry after an ambiguous failure (timeout after the server stored it) is de-duplicated by the stream
  (within its duplicate window, 2 minutes by default).
- Streams declared with :meth:`ensure_stream` and subscriptions made with :meth:`serve`/:meth:`subscribe`
  before NATS was reachable are applied when it is; streams are re-applied after every reconnect.

The bus in modules: this one is the client (connection, streams, the public calls); the outbox and its
delivery task (with the ``draflow_bus_*`` metrics) are in :mod:`draflow_runtime.outbox`, request/reply and
nudge callbacks in :mod:`draflow_runtime.busrpc`, the pull consumer in :mod:`draflow_runtime.busconsumer`,
the errors (all :class:`BusError`) and their tree in :mod:`draflow_runtime.buserrors` (all importable
from here).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Mapping

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig
from nats.js.client import JetStreamContext
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential_jitter

from draflow_runtime.busauth import NatsSecurity
from draflow_runtime.busconnect import ConnectFailed, connect_once
from draflow_runtime.busconsumer import PullConsumer
from draflow_runtime.buserrors import (
    _TRANSIENT,
    BusError,
    BusUnavailable,
    NoResponders,
    PublishRejected,
    RemoteError,
    RequestTimeout,
)
from draflow_runtime.busrpc import ERROR_HEADER, Handler, NudgeHandler, SubSpec, listener, request, responder
from draflow_runtime.log import get_logger
from draflow_runtime.outbox import MSG_ID_HEADER, Outbox, OutboxDelivery, OutboxMessage
from draflow_runtime.tracing import inject_into_headers

__all__ = [
    "ERROR_HEADER",
    "MSG_ID_HEADER",
    "BusError",
    "BusUnavailable",
    "EventBus",
    "NoResponders",
    "Outbox",
    "OutboxMessage",
    "PublishRejected",
    "PullConsumer",
    "RemoteError",
    "RequestTimeout",
]

log = get_logger(__name__)


class EventBus:
    """NATS connection of one service. An empty ``url`` disables NATS: publishes are discarded (returning
    False), requests raise :class:`BusUnavailable`, subscriptions never fire. ``security``: credentials
    and TLS (:class:`draflow_runtime.busauth.NatsSecurity`). A server that refuses the connection (wrong
    credentials, TLS required or failing) is logged as an error naming the server and the reason, kept in
    :attr:`last_error`, and retried with backoff like an unreachable one. ``linger``: seconds published
    messages wait to share one write (:class:`~draflow_runtime.outbox.OutboxDelivery`; 0: at once)."""

    def __init__(
        self,
        url: str,
        *,
        name: str,
        outbox_size: int = 10000,
        publish_timeout: float = 5.0,
        connect_timeout: float = 2.0,
        reconnect_wait: float = 1.0,
        max_backoff: float = 10.0,
        drain_timeout: float = 5.0,
        max_in_flight: int = 256,
        security: NatsSecurity | None = None,
        linger: float = 0.0,
    ) -> None:
        self.url = url
        self.name = name
        self.security = security or NatsSecurity()
        self.last_error = ""
        """Why the last connection attempt failed ("" after a success)."""
        self._publish_timeout = publish_timeout
        self._connect_timeout = connect_timeout
        self._reconnect_wait = reconnect_wait
        self._max_backoff = max_backoff
        self._drain_timeout = drain_timeout
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._ready = asyncio.Event()  # connected and streams applied
        self._delivery = OutboxDelivery(
            name, outbox_size, self._send, self._ready, max_in_flight=max_in_flight, max_backoff=max_backoff,
            linger=linger,
        )
        self._outbox = self._delivery.outbox
        self._streams: dict[str, StreamConfig] = {}
        self._subs: list[SubSpec] = []
        self._consumers: list[PullConsumer] = []
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @property
    def connected(self) -> bool:
        """Connected to NATS with every declared stream applied."""
        return self._ready.is_set() and self._nc is not None and self._nc.is_connected

    @property
    def outbox_size(self) -> int:
        return len(self._outbox)

    async def start(self) -> None:
        """Connect in the background and return once connected or after ``connect_timeout`` seconds,
        whichever comes first. Never raises because NATS is unreachable."""
        if not self.enabled:
            log.info("nats disabled", bus=self.name)
            return
        self._tasks = [
            asyncio.create_task(self._connect_forever(), name=f"bus-{self.name}-connect"),
            asyncio.create_task(self._delivery.run_forever(), name=f"bus-{self.name}-outbox"),
        ]
        if not await self.wait_connected(self._connect_timeout):
            log.warning("nats unreachable, starting without it", bus=self.name, url=self.url)

    async def wait_connected(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until :attr:`connected` (at most ``timeout`` seconds); return whether it is."""
        if not self.enabled:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)
        return self.connected

    async def stop(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Give the outbox up to ``timeout`` seconds to drain (if connected), then drain the connection:
        subscriptions finish their in-flight messages, buffered publishes are flushed. Messages still in
        the outbox are lost and logged."""
        if self.connected and len(self._outbox):
            await self._delivery.wait_empty(timeout)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for consumer in self._consumers:
            # A pull subscription keeps late "408 request timeout" status messages queued forever,
            # which would make drain() wait for its full timeout.
            await consumer.close()
        if len(self._outbox):
            log.warning("outbox not delivered before stop", bus=self.name, messages=len(self._outbox))
        nc, self._nc, self._js = self._nc, None, None
        self._ready.clear()
        if nc is not None and not nc.is_closed:
            try:
                await (nc.drain() if nc.is_connected else nc.close())
            except _TRANSIENT as exc:
                log.warning("nats drain failed", bus=self.name, error=repr(exc))

    # -- connection

    async def _connect_forever(self) -> None:
        retrying = AsyncRetrying(
            wait=wait_exponential_jitter(multiplier=0.2, max=self._max_backoff),
            retry=retry_if_exception_type(_TRANSIENT),  # ssl.SSLError is an OSError
            before_sleep=lambda rs: log.debug(
                "nats connect failed, retrying", bus=self.name, attempt=rs.attempt_number
            ),
        )
        nc: Client = await retrying(self._connect_once)
        self._nc, self._js = nc, nc.jetstream(timeout=self._publish_timeout)
        self.last_error = ""
        log.info("nats connected", bus=self.name, url=self.url, security=self.security.describe())
        await self._on_connected()

    async def _connect_once(self) -> Client:
        """One bounded connection attempt. After it succeeds nats-py reconnects forever by itself."""
        try:
            return await connect_once(
                self.url, self.security, within=self._connect_timeout + 0.5, error_cb=self._on_error,
                name=self.name, allow_reconnect=True, max_reconnect_attempts=-1,
                reconnect_time_wait=self._reconnect_wait, connect_timeout=self._connect_timeout,
                disconnected_cb=self._on_disconnected, reconnected_cb=self._on_reconnected,
                closed_cb=self._on_disconnected, drain_timeout=self._drain_timeout,
            )
        except ConnectFailed as exc:  # retried; a configuration problem is logged loudly, every attempt
            self.last_error = str(exc)
            if exc.kind == "refused":
                log.error("nats connection refused", bus=self.name, url=self.url, reason=exc.reason,
                          security=self.security.describe())
            elif exc.kind == "unusable":
                log.error("nats credentials unusable", bus=self.name, url=self.url, error=exc.reason)
            raise

    async def _on_connected(self) -> None:
        """Apply declared streams and pending subscriptions (retrying while connected, e.g. until
        JetStream is ready after a server restart), then let the outbox flow."""
        delay = 0.2
        while self._nc is not None and self._nc.is_connected:
            try:
                await self._set_up()
            except _TRANSIENT as exc:
                log.warning("nats set-up after connect failed, retrying", bus=self.name, error=repr(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)
                continue
            self._ready.set()
            self._delivery.wake()
            return

    async def _set_up(self) -> None:
        for config in list(self._streams.values()):
            await self._apply_stream(config)
        for spec in self._subs:
            if spec.sub is None:
                await self._subscribe_spec(spec)

    async def _on_error(self, exc: Exception) -> None:
        log.debug("nats client error", bus=self.name, error=repr(exc))

    async def _on_disconnected(self) -> None:
        if self._ready.is_set():
            log.warning("nats disconnected", bus=self.name)
        self._ready.clear()

    async def _on_reconnected(self) -> None:
        log.info("nats reconnected", bus=self.name)
        # Not inline: nats-py awaits this callback inside its reconnect loop.
        self._tasks.append(asyncio.create_task(self._on_connected(), name=f"bus-{self.name}-reconnected"))

    def _jetstream(self) -> JetStreamContext:
        if self._js is None:
            raise BusUnavailable("not connected to NATS")
        return self._js

    def jetstream(self) -> JetStreamContext:
        """The JetStream context of the current connection, to read history (e.g.
        :func:`draflow_runtime.lifecycle.claim_timeline`); :class:`BusUnavailable` while not connected."""
        return self._jetstream()

    # -- publishing and the outbox

    async def publish(
        self,
        subject: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        jetstream: bool = True,
        msg_id: str | None = None,
    ) -> bool:
        """Queue ``data`` (with the current trace context) for delivery; True if queued, False if NATS is
        disabled. Never waits for NATS, never raises because of it.

        The message goes into the bounded FIFO outbox (full: the oldest is dropped, counted and logged) and
        the bus's delivery task sends it in order, JetStream messages acknowledged, retried with backoff
        while NATS is unreachable. ``msg_id`` (default: a random UUID) is the JetStream de-duplication id.
        A message JetStream refuses (4xx, e.g. no stream takes the subject) is dropped with an error log
        and ``draflow_bus_dropped_total{reason="rejected"}``. Use :meth:`flush` to wait for delivery.
        """
        if not self.enabled:
            return False
        hdrs = inject_into_headers(headers)
        if jetstream:
            hdrs[MSG_ID_HEADER] = msg_id or hdrs.get(MSG_ID_HEADER) or uuid.uuid4().hex
        self._delivery.keep(OutboxMessage(subject, data, hdrs, jetstream))
        return True

    async def flush(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait (at most ``timeout`` seconds) until every message published so far has been delivered or
        dropped; return whether the outbox is empty."""
        if not self.enabled:
            return True
        return await self._delivery.wait_empty(timeout)

    async def _send(self, msg: OutboxMessage) -> None:
        nc = self._nc
        if nc is None or not nc.is_connected:
            raise nats.errors.ConnectionClosedError
        if msg.jetstream:
            ack = await self._jetstream().publish(
                msg.subject, msg.data, timeout=self._publish_timeout, headers=dict(msg.headers)
            )
            if ack.duplicate:
                log.debug("duplicate publish ignored by jetstream", subject=msg.subject, seq=ack.seq)
        else:
            await nc.publish(msg.subject, msg.data, headers=dict(msg.headers))

    # -- JetStream set-up

    async def ensure_stream(
        self,
        name: str,
        subjects: Iterable[str],
        max_age_seconds: float = 0,
        max_msgs: int = -1,
        max_bytes: int = -1,
        *,
        duplicate_window_seconds: float = 120.0,
    ) -> None:
        """Declare a file-backed stream; create it or update it to this configuration (idempotent).

        Applied now if connected (API errors raise :class:`BusError`), otherwise on connection; re-applied
        after every reconnect. ``0``/``-1`` mean unlimited.
        """
        config = StreamConfig(
            name=name,
            subjects=list(subjects),
            max_age=max_age_seconds or None,
            max_msgs=max_msgs,
            max_bytes=max_bytes,
            storage=StorageType.FILE,
            duplicate_window=duplicate_window_seconds,
        )
        self._streams[name] = config
        if self.connected:
            try:
                await self._apply_stream(config)
            except _TRANSIENT as exc:
                raise BusError(
                    f"ensure stream {name}: {exc!r}", subject=",".join(config.subjects or [])
                ) from exc

    async def _apply_stream(self, config: StreamConfig) -> None:
        js = self._jetstream()
        try:
            await js.stream_info(config.name or "")
        except nats.js.errors.NotFoundError:
            await js.add_stream(config=config)
            log.info("stream created", bus=self.name, stream=config.name)
        else:
            await js.update_stream(config=config)

    async def pull_consumer(
        self, stream: str, durable: str, filter_subject: str, *, ack_wait: float = 30.0
    ) -> PullConsumer:
        """A durable pull consumer on ``stream`` for ``filter_subject``; created now if connected."""
        consumer = PullConsumer(self, stream, durable, filter_subject, ack_wait)
        self._consumers.append(consumer)
        if self.connected:
            try:
                await consumer._subscription()
            except _TRANSIENT as exc:
                raise BusError(f"create consumer {durable}: {exc!r}", subject=filter_subject) from exc
        return consumer

    # -- request/reply and nudges

    async def request(
        self,
        subject: str,
        data: bytes,
        timeout: float,  # noqa: ASYNC109 -- the contract's signature; also the NATS request expiry
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """Core NATS request/reply with the current trace context; returns the reply payload."""
        return await request(self._nc, subject, data, timeout, headers)

    async def serve(self, subject: str, handler: Handler, queue: str | None = None) -> None:
        """Answer requests on ``subject`` with ``await handler(data, headers)``.

        The handler runs with the requester's trace context current. If it raises, the requester gets
        :class:`RemoteError`. Requests of one subscription are handled one at a time; use a ``queue``
        group to spread them over replicas.
        """
        callback = responder(self.name, subject, handler, lambda: self._nc)
        await self._add_subscription(SubSpec(subject, callback, queue or ""))

    async def subscribe(self, subject: str, handler: NudgeHandler) -> None:
        """Call ``await handler(data, headers)`` for each core NATS message on ``subject`` (nudges:
        at-most-once, lost while disconnected). Runs with the publisher's trace context current."""
        await self._add_subscription(SubSpec(subject, listener(self.name, subject, handler)))

    async def _add_subscription(self, spec: SubSpec) -> None:
        self._subs.append(spec)
        if self.enabled and self._nc is not None and self._nc.is_connected:
            await self._subscribe_spec(spec)

    async def _subscribe_spec(self, spec: SubSpec) -> None:
        assert self._nc is not None
        spec.sub = await self._nc.subscribe(spec.subject, queue=spec.queue, cb=spec.callback)
        # a round trip: the server has the subscription before serve()/subscribe() returns (else a request
        # sent right after may find "no responders"); a lost connection re-subscribes on reconnect
        with contextlib.suppress(nats.errors.Error, asyncio.TimeoutError):
            await self._nc.flush(timeout=5)

