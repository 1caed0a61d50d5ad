"""Delegated authentication and authorization of the services' HTTP endpoints (as kube-rbac-proxy and
controller-runtime's secure metrics serving do).

A request to a protected path must carry ``Authorization: Bearer <token>``:

1. **authentication**: a ``TokenReview`` (``authentication.k8s.io/v1``) asks the API server who the token
   belongs to; no token, or a token the API server does not accept → **401**.
2. **authorization**: a ``SubjectAccessReview`` (``authorization.k8s.io/v1``) asks whether that user may
   ``<verb>`` the non-resource URL ``<path>`` (``GET``/``HEAD`` → ``get``); denied → **403**. RBAC grants
   it with ``nonResourceURLs`` (``/explain``, ``/explain/*``, ``/ui``, ``/ui/*``, ``/debug/*``, ``/metrics``).

Answers (allowed and denied alike) are reused for ``cache_seconds``; an API server that cannot answer gives
**503** and nothing is cached. The process needs ``create`` on ``tokenreviews`` and
``subjectaccessreviews`` (the ``system:auth-delegator`` rights).

:func:`auth_applies` decides from the settings: ``http_auth`` ``on``/``off``, or ``auto`` — on unless the
server listens on a loopback address only.
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .errors import ApiError, TransportError
from .kube import KubeClient
from .log import get_logger
from .settings import HttpAuthMode

__all__ = ["AuthUnavailable", "DelegatedAuth", "User", "auth_applies", "auth_middleware", "is_loopback"]

log = get_logger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
         "DELETE": "delete"}


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_applies(mode: HttpAuthMode, host: str) -> bool:
    """Whether the delegated checks run: ``on``, ``off``, or ``auto`` = on unless bound to loopback."""
    if mode == "auto":
        return not is_loopback(host)
    return mode == "on"


class AuthUnavailable(Exception):
    """The API server could not answer a review (the request gets 503); the cause is attached."""

    def __init__(self, review: str, reason: str) -> None:
        super().__init__(f"{review} failed: {reason}")
        self.review = review


@dataclass(frozen=True)
class User:
    """Who a token belongs to, as the TokenReview answered."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)


class _TtlCache:
    """A bounded map whose entries expire ``ttl`` seconds after they were stored (oldest evicted first)."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self._ttl, self._size, self._clock = ttl, size, clock
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> tuple[bool, Any]:
        hit = self._items.get(key)
        if hit is None:
            return False, None
        if hit[0] <= self._clock():
            del self._items[key]
            return False, None
        return True, hit[1]

    def put(self, key: Any, value: Any) -> None:
        if self._ttl <= 0:
            return
        self._items.pop(key, None)
        self._items[key] = (self._clock() + self._ttl, value)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


class DelegatedAuth:
    """TokenReview + SubjectAccessReview against ``kube``, answers cached for ``cache_seconds``."""

    def __init__(self, kube: KubeClient, *, cache_seconds: float = 10.0, cache_size: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube
        self._users = _TtlCache(cache_seconds, cache_size, clock)
        self._decisions = _TtlCache(cache_seconds, cache_size, clock)

    async def authenticate(self, token: str) -> User | None:
        """The user of ``token``, or None when the API server does not accept it. Raises
        :class:`AuthUnavailable` when it cannot answer."""
        key = hashlib.sha256(token.encode()).digest()  # the token itself is never kept
        hit, user = self._users.get(key)
        if hit:
            return user  # type: ignore[no-any-return]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            answer = await self._kube.request("POST", TOKEN_REVIEWS, body=review)
        except (ApiError, TransportError) as exc:
            raise AuthUnavailable("TokenReview", repr(exc)) from exc
        status = answer.get("status") or {}
        user = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = User(str(info.get("username", "")), str(info.get("uid", "")),
                        tuple(info.get("groups") or ()), dict(info.get("extra") or {}))
        self._users.put(key, user)
        return user

    async def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``, and the authorizer's reason.
        Raises :class:`AuthUnavailable` when the API server cannot answer."""
        key = (user.name, user.uid, user.groups, verb, path)
        hit, decision = self._decisions.get(key)
        if hit:
            return decision  # type: ignore[no-any-return]
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            answer = await self._kube.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
        except (ApiError, TransportError) as exc:
            raise AuthUnavailable("SubjectAccessReview", repr(exc)) from exc
        status = answer.get("status") or {}
        decision = (bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason", "")))
        self._decisions.put(key, decision)
        return decision


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def auth_middleware(auth: DelegatedAuth, is_open: Callable[[str], bool]) -> Any:
    """An aiohttp middleware: paths for which ``is_open(path)`` is true pass; every other request needs a
    token whose user may ``<verb> <path>`` (401 / 403 / 503 otherwise, see the module docstring)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if is_open(path):
            return await handler(request)  # type: ignore[no-any-return]
        verb = VERBS.get(request.method, request.method.lower())
        token = _bearer(request)
        unauthorized = {"WWW-Authenticate": 'Bearer realm="draflow"'}
        if not token:
            return web.Response(status=401, headers=unauthorized,
                                text=f"unauthorized: {path} needs an Authorization: Bearer token\n")
        try:
            user = await auth.authenticate(token)
            if user is None:
                log.info("http request unauthenticated", path=path, verb=verb)
                return web.Response(status=401, headers=unauthorized,
                                    text=f"unauthorized: the token for {path} was not accepted\n")
            allowed, reason = await auth.authorize(user, verb, path)
        except AuthUnavailable as exc:
            log.warning("http auth unavailable", path=path, review=exc.review, error=str(exc))
            return web.Response(status=503, text=f"authentication unavailable for {path}: {exc}\n")
        if not allowed:
            log.info("http request forbidden", path=path, verb=verb, user=user.name, reason=reason)
            text = f'forbidden: user "{user.name}" cannot {verb} path "{path}"'
            return web.Response(status=403, text=text + (f": {reason}\n" if reason else "\n"))
        return await handler(request)  # type: ignore[no-any-return]

    return middleware
