"""Request/reply and nudges of :class:`draflow_runtime.bus.EventBus` (``bus.request``, ``bus.serve``,
``bus.subscribe``): the core NATS calls with the W3C trace context carried in the headers, and the
message callbacks that run a handler under the sender's trace context. Use them through the bus."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from draflow_runtime.buserrors import _TRANSIENT, BusUnavailable, NoResponders, RemoteError, RequestTimeout
from draflow_runtime.log import get_logger
from draflow_runtime.tracing import attach, context_from_headers, detach, inject_into_headers

__all__ = ["ERROR_HEADER", "Handler", "NudgeHandler"]

log = get_logger("draflow_runtime.bus")

ERROR_HEADER = "Draflow-Error"

Handler = Callable[[bytes, dict[str, str]], Awaitable[bytes]]
NudgeHandler = Callable[[bytes, dict[str, str]], Awaitable[None]]
Callback = Callable[[Msg], Awaitable[None]]


@dataclass
class SubSpec:
    """A subscription the bus (re)applies once connected; ``sub`` is set while it is live."""

    subject: str
    callback: Callback
    queue: str = ""
    sub: Subscription | None = None


async def request(
    nc: Client | None,
    subject: str,
    data: bytes,
    timeout: float,  # noqa: ASYNC109 -- also the NATS request expiry
    headers: Mapping[str, str] | None,
) -> bytes:
    """Core NATS request/reply over ``nc`` with the current trace context; returns the reply payload."""
    if nc is None or not nc.is_connected:
        raise BusUnavailable("not connected to NATS", subject=subject)
    try:
        reply = await nc.request(subject, data, timeout=timeout, headers=inject_into_headers(headers))
    except nats.errors.NoRespondersError as exc:
        raise NoResponders("no responders", subject=subject) from exc
    except nats.errors.TimeoutError as exc:
        raise RequestTimeout("no reply in time", subject=subject, timeout=timeout) from exc
    except _TRANSIENT as exc:
        raise BusUnavailable(f"request failed: {exc!r}", subject=subject) from exc
    if reply.headers and ERROR_HEADER in reply.headers:
        remote = reply.headers[ERROR_HEADER]
        raise RemoteError(f"responder failed: {remote}", subject=subject, remote=remote)
    return reply.data


def responder(bus: str, subject: str, handler: Handler, client: Callable[[], Client | None]) -> Callback:
    """The callback answering one request with ``await handler(data, headers)`` under the requester's
    trace context; a handler that raises becomes an empty reply with the ``Draflow-Error`` header.
    ``client()`` is the connection to reply on (None: gone, the reply is dropped)."""

    async def on_request(msg: Msg) -> None:
        headers = dict(msg.headers or {})
        reply_headers: dict[str, str] | None = None
        token = attach(context_from_headers(headers))
        try:
            body = await handler(msg.data, headers)
        except Exception as exc:
            log.exception("request handler failed", bus=bus, subject=subject)
            body = b""
            reply_headers = {ERROR_HEADER: " ".join(f"{type(exc).__name__}: {exc}".split())}
        finally:
            detach(token)
        nc = client()
        if msg.reply and nc is not None:
            with contextlib.suppress(*_TRANSIENT):
                await nc.publish(msg.reply, body, headers=reply_headers)

    return on_request


def listener(bus: str, subject: str, handler: NudgeHandler) -> Callback:
    """The callback running ``await handler(data, headers)`` for one message under the publisher's trace
    context; a handler that raises is logged, never propagated."""

    async def on_message(msg: Msg) -> None:
        headers = dict(msg.headers or {})
        token = attach(context_from_headers(headers))
        try:
            await handler(msg.data, headers)
        except Exception:
            log.exception("message handler failed", bus=bus, subject=subject)
        finally:
            detach(token)

    return on_message
