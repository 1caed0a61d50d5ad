"""The errors of :mod:`draflow_runtime.bus` and how a NATS failure maps onto them. Import them from
:mod:`draflow_runtime.bus`.

Errors (all :class:`BusError`, a ``DraflowError``)::

    BusError
    ├── BusUnavailable     not connected / the connection broke during the call
    ├── NoResponders       request: nobody serves the subject
    ├── RequestTimeout     request: no reply within the timeout
    ├── RemoteError        request: the responder's handler raised (``Draflow-Error`` reply header)
    └── PublishRejected    JetStream refused the message (4xx: no such stream, limits...); not retried:
                           the delivery task logs and drops it (publish itself never raises it)
"""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors

from draflow_runtime.errors import DraflowError

__all__ = [
    "BusError",
    "BusUnavailable",
    "NoResponders",
    "PublishRejected",
    "RemoteError",
    "RequestTimeout",
]

# Failures worth retrying once NATS is reachable again.
_TRANSIENT = (nats.errors.Error, asyncio.TimeoutError, OSError)


class BusError(DraflowError):
    """A NATS operation failed; ``subject`` names what it was about."""

    def __init__(self, message: str, *, subject: str = "") -> None:
        super().__init__(message)
        self.subject = subject


class BusUnavailable(BusError):
    """NATS is not connected (or disabled), or the connection broke during the call. Retryable."""


class NoResponders(BusError):
    """A request found no responder for its subject."""


class RequestTimeout(BusError):
    """A request got no reply within ``timeout`` seconds."""

    def __init__(self, message: str, *, subject: str, timeout: float) -> None:
        super().__init__(message, subject=subject)
        self.timeout = timeout


class RemoteError(BusError):
    """The responder's handler raised; ``remote`` is its ``Draflow-Error`` header."""

    def __init__(self, message: str, *, subject: str, remote: str) -> None:
        super().__init__(message, subject=subject)
        self.remote = remote


class PublishRejected(BusError):
    """JetStream refused the message with a 4xx API error (``code``, ``err_code``). Not retried."""

    def __init__(self, message: str, *, subject: str, code: int | None, err_code: int | None) -> None:
        super().__init__(message, subject=subject)
        self.code = code
        self.err_code = err_code


def _is_rejection(exc: BaseException) -> bool:
    return isinstance(exc, nats.js.errors.APIError) and exc.code is not None and 400 <= exc.code < 500


def _rejected(exc: nats.js.errors.APIError, subject: str) -> PublishRejected:
    return PublishRejected(
        f"JetStream rejected the message: {exc.description}",
        subject=subject,
        code=exc.code,
        err_code=exc.err_code,
    )
