"""One connection attempt to NATS with :class:`draflow_runtime.busauth.NatsSecurity`'s credentials and TLS,
and the error that says why it failed (refused by the server, unusable files, unreachable)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from nats.aio.client import Client

from .busauth import NatsSecurity

__all__ = ["ConnectFailed", "connect_once", "error_text", "is_refusal"]


def is_refusal(exc: BaseException) -> bool:
    """The server (not the network) said no: bad credentials, TLS demanded or failing verification."""
    if isinstance(exc, nats.errors.AuthorizationError | ssl.SSLError | nats.errors.SecureConnRequiredError
                  | nats.errors.SecureConnFailedError | nats.errors.SecureConnWantedError):
        return True
    text = str(exc).lower()
    return "authorization violation" in text or "tls" in text


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, for logs and :attr:`EventBus.last_error`."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class ConnectFailed(nats.errors.Error):
    """One connection attempt failed (a ``nats.errors.Error``: the bus retries it). ``kind``: ``refused``
    (the server answered and said no: credentials, TLS), ``unusable`` (a credentials or TLS file cannot
    be read) or ``unreachable``; ``reason`` the underlying error; the message names the server."""

    def __init__(self, url: str, kind: str, reason: str) -> None:
        what = {"refused": "refused the connection", "unusable": "credentials unusable"}.get(
            kind, "unreachable")
        super().__init__(f"nats server {url} {what}: {reason}")
        self.kind, self.reason = kind, reason

    def __str__(self) -> str:  # nats.errors.Error prefixes "nats: "
        return str(self.args[0])


async def connect_once(url: str, security: NatsSecurity, *, within: float,
                       error_cb: Callable[[Exception], Awaitable[None]], **options: Any) -> Client:
    """One connection attempt of at most ``within`` seconds with ``security``'s credentials and TLS and
    nats-py's ``options``; raises :class:`ConnectFailed` saying why (the cause attached)."""
    try:
        credentials = security.connect_options()
    except OSError as exc:
        raise ConnectFailed(url, "unusable", error_text(exc)) from exc
    nc, refused = Client(), [""]

    async def on_error(exc: Exception) -> None:  # nats-py reports the server's -ERR here, not in connect
        if is_refusal(exc):
            refused[0] = error_text(exc)
        await error_cb(exc)

    try:
        await asyncio.wait_for(nc.connect(url, **credentials, **options, error_cb=on_error), timeout=within)
    except Exception as exc:
        with contextlib.suppress(Exception):
            await nc.close()
        reason = refused[0] or (error_text(exc) if is_refusal(exc) else "")
        raise ConnectFailed(url, "refused" if reason else "unreachable", reason or error_text(exc)) from exc
    except BaseException:
        with contextlib.suppress(Exception):
            await nc.close()
        raise
    return nc
