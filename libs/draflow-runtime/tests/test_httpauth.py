"""draflow_runtime.httpauth's pure parts: when the checks apply, and how long an answer is reused (a fake
API server at the client seam, a fake clock)."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_runtime.errors import TransportError
from draflow_runtime.httpauth import AuthUnavailable, DelegatedAuth, User, auth_applies, is_loopback


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("my-host", False), ("", False),
])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("mode", "host", "applies"), [
    ("auto", "0.0.0.0", True), ("auto", "127.0.0.1", False), ("on", "127.0.0.1", True),
    ("off", "0.0.0.0", False),
])
def test_auth_applies(mode: Any, host: str, applies: bool) -> None:
    assert auth_applies(mode, host) is applies


class FakeApiServer:
    """Answers reviews from tables; ``reviews`` counts what reached it."""

    def __init__(self) -> None:
        self.users = {"good": {"username": "alice", "uid": "u1", "groups": ["devs"]}}
        self.allowed = {("alice", "/explain")}
        self.reviews = 0
        self.down = False

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        if self.down:
            raise TransportError("connection refused")
        self.reviews += 1
        spec = body["spec"]
        if body["kind"] == "TokenReview":
            user = self.users.get(spec["token"])
            return {"status": {"authenticated": user is not None, **({"user": user} if user else {})}}
        attrs = spec["nonResourceAttributes"]
        return {"status": {"allowed": (spec["user"], attrs["path"]) in self.allowed}}


async def test_answers_are_reused_until_they_expire() -> None:
    api, now = FakeApiServer(), [0.0]
    auth = DelegatedAuth(api, cache_seconds=10, clock=lambda: now[0])  # type: ignore[arg-type]
    user = await auth.authenticate("good")
    assert user == User("alice", "u1", ("devs",))
    assert await auth.authenticate("bad") is None
    assert await auth.authorize(user, "get", "/explain") == (True, "")
    assert (await auth.authorize(user, "get", "/debug/claims"))[0] is False
    assert api.reviews == 4
    now[0] = 9.9  # within the TTL: no review reaches the API server, not even for the bad token
    api.down = True
    assert await auth.authenticate("good") == user and await auth.authenticate("bad") is None
    assert (await auth.authorize(user, "get", "/debug/claims"))[0] is False
    now[0] = 10.0  # expired: asked again; an API server that cannot answer is an error, not a denial
    with pytest.raises(AuthUnavailable, match="TokenReview failed"):
        await auth.authenticate("good")
    api.down = False
    api.allowed.add(("alice", "/debug/claims"))
    assert await auth.authorize(user, "get", "/debug/claims") == (True, "")


async def test_a_zero_ttl_never_reuses_an_answer() -> None:
    api = FakeApiServer()
    auth = DelegatedAuth(api, cache_seconds=0)  # type: ignore[arg-type]
    for _ in range(3):
        assert await auth.authenticate("good") is not None
    assert api.reviews == 3
