"""Typed errors of draflow.

Error tree::

    DraflowError
    ├── TransportError          the API server could not be reached / the connection broke
    ├── TerminalError           a reconcile that must not be retried (re-exported by ``reconcile``)
    └── ApiError                a non-2xx answer, built from the Kubernetes ``Status`` body
        ├── BadRequest          400
        ├── Unauthorized        401
        ├── Forbidden           403
        ├── NotFound            404
        ├── Conflict            409 (optimistic concurrency: stale resourceVersion)
        │   └── AlreadyExists   409 reason AlreadyExists
        ├── Gone                410 (resourceVersion too old / expired continue token)
        ├── Invalid             422 (``causes`` lists the offending fields)
        ├── TooManyRequests     429 (``retry_after`` from ``details.retryAfterSeconds``)
        ├── Timeout             504, or reason Timeout / ServerTimeout
        └── ServerError         any other 5xx

Always ``raise ... from exc`` so the transport error stays attached.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "DraflowError",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TerminalError",
    "Timeout",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "api_error_from_status",
]


class DraflowError(Exception):
    """Base of every error draflow raises on purpose."""


class TransportError(DraflowError):
    """The request did not get an HTTP answer (connection refused, reset, TLS, client timeout).

    Always retryable; the underlying aiohttp/OS error is the ``__cause__``.
    """


class TerminalError(DraflowError):
    """A reconcile failure that retrying cannot fix (bad spec, unsupported request).

    The runner does not retry it: it logs it and calls its ``on_terminal`` callback, which is where a
    service turns it into a Kubernetes Event and/or condition. ``obj`` is the object the error is about
    (optional), so the callback can name it.
    """

    def __init__(self, message: str, *, obj: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.obj = obj


class ApiError(DraflowError):
    """A non-2xx answer of the API server.

    ``status`` is the HTTP code, ``reason`` the ``Status.reason`` (``NotFound``, ``Conflict``...),
    ``message`` the human text, ``details`` the ``Status.details`` dict (name, kind, causes,
    retryAfterSeconds) and ``body`` the whole decoded ``Status`` (or ``None`` when the body was not JSON).
    """

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        details: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.body = body

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``details.causes``: ``[{"reason", "message", "field"}]``, empty when the server gave none."""
        return list(self.details.get("causes") or [])


class BadRequest(ApiError):
    """400: the request is malformed (bad patch, bad selector)."""


class Unauthorized(ApiError):
    """401: no or bad credentials."""


class Forbidden(ApiError):
    """403: RBAC denies the verb, or the namespace is terminating."""


class NotFound(ApiError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class Conflict(ApiError):
    """409: the write used a stale ``resourceVersion``; re-read and retry from fresh state."""


class AlreadyExists(Conflict):
    """409 with reason ``AlreadyExists``: a create of a name that exists."""


class Gone(ApiError):
    """410: the requested ``resourceVersion`` (or continue token) was compacted; relist."""


class Invalid(ApiError):
    """422: validation failed; ``causes`` names the fields."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness; ``retry_after`` seconds if the server said."""

    @property
    def retry_after(self) -> float | None:
        value = self.details.get("retryAfterSeconds")
        return float(value) if value is not None else None


class Timeout(ApiError):
    """504 or reason ``Timeout``/``ServerTimeout``: the server gave up; a write may have happened."""


class ServerError(ApiError):
    """Any other 5xx."""


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Gone,
    "Expired": Gone,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "Timeout": Timeout,
    "ServerTimeout": Timeout,
}

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    504: Timeout,
}


def api_error_from_status(status_code: int, body_bytes: bytes | str | dict[str, Any] | None) -> ApiError:
    """Build the typed error for an HTTP answer ``status_code`` with body ``body_bytes``.

    The body is a Kubernetes ``Status`` (JSON bytes, or an already decoded dict as found in watch
    ``ERROR`` events). The class is chosen by ``Status.reason`` first (so ``AlreadyExists`` and
    ``Expired`` are told apart from their codes' defaults), then by the code. A body that is not a
    ``Status`` (a proxy's HTML page) still gives a typed error, with the raw text as message.
    Never raises.
    """
    body: dict[str, Any] | None = None
    raw_text = ""
    if isinstance(body_bytes, dict):
        body = body_bytes
    elif body_bytes:
        try:
            decoded = orjson.loads(body_bytes)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            body = decoded
        else:
            raw = body_bytes if isinstance(body_bytes, str) else body_bytes.decode("utf-8", "replace")
            raw_text = raw.strip()[:512]
    reason = str((body or {}).get("reason") or "")
    message = str((body or {}).get("message") or raw_text)
    details = (body or {}).get("details") or {}
    if not isinstance(details, dict):
        details = {}
    cls = _BY_REASON.get(reason) or _BY_CODE.get(status_code)
    if cls is None:
        cls = ServerError if status_code >= 500 else ApiError
    return cls(status_code, reason, message, details, body)
