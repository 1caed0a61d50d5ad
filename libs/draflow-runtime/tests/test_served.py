"""The verdict on an optional API from its discovery answer, and the retry loop around it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from draflow_runtime.errors import TransportError, api_error_from_status
from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIMS
from draflow_runtime.served import Verdict, decide, discovery_path, served


def _error(code: int, reason: str) -> Exception:
    return api_error_from_status(code, orjson.dumps({"kind": "Status", "code": code, "reason": reason}))


def _discovery(*names: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "groupVersion": "scheduling.k8s.io/v1beta1",
            "resources": [{"name": n, "namespaced": True, "kind": "PodGroup"} for n in names]}


@pytest.mark.parametrize(
    ("discovery", "error", "expected"),
    [
        pytest.param(_discovery("podgroups", "podgroups/status", "workloads"), None, Verdict.SERVED,
                     id="listed"),
        pytest.param(_discovery("workloads"), None, Verdict.NOT_SERVED, id="version-served-resource-not"),
        pytest.param(_discovery("podgroups/status"), None, Verdict.NOT_SERVED, id="only-a-subresource"),
        pytest.param({}, None, Verdict.NOT_SERVED, id="empty-document"),
        pytest.param(None, _error(404, "NotFound"), Verdict.NOT_SERVED, id="version-not-served"),
        pytest.param(None, api_error_from_status(404, b"404 page not found"), Verdict.NOT_SERVED,
                     id="not-found-plain-text"),
        pytest.param(None, _error(403, "Forbidden"), Verdict.SERVED, id="forbidden-is-not-unserved"),
        pytest.param(None, _error(401, "Unauthorized"), Verdict.SERVED, id="unauthorized-is-not-unserved"),
        pytest.param(None, _error(429, "TooManyRequests"), Verdict.RETRY, id="throttled"),
        pytest.param(None, _error(500, "InternalError"), Verdict.RETRY, id="server-error"),
        pytest.param(None, _error(503, "ServiceUnavailable"), Verdict.RETRY, id="unavailable"),
        pytest.param(None, _error(504, "Timeout"), Verdict.RETRY, id="timeout"),
        pytest.param(None, TransportError("connection refused"), Verdict.RETRY, id="no-connection"),
    ],
)
def test_decide(discovery: dict[str, Any] | None, error: Exception | None, expected: Verdict) -> None:
    assert decide(POD_GROUPS, discovery, error) is expected


def test_decide_raises_what_is_not_an_api_answer() -> None:
    with pytest.raises(ValueError):
        decide(POD_GROUPS, None, ValueError("bug"))


def test_discovery_paths() -> None:
    assert discovery_path(POD_GROUPS) == "/apis/scheduling.k8s.io/v1beta1"
    assert discovery_path(RESOURCE_CLAIMS) == "/apis/resource.k8s.io/v1"
    assert discovery_path(PODS) == "/api/v1"


class _Discovery:
    """The transport seam: answers (documents, or errors to raise) in order, the paths asked recorded."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.paths: list[str] = []

    async def request(self, method: str, path: str) -> dict[str, Any]:
        assert method == "GET"
        self.paths.append(path)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)


@pytest.mark.parametrize(
    ("answers", "expected", "sleeps"),
    [
        pytest.param([_discovery("podgroups")], True, [], id="served-at-once"),
        pytest.param([_error(404, "NotFound")], False, [], id="not-served-at-once"),
        pytest.param([_error(403, "Forbidden")], True, [], id="forbidden-assumed-served"),
        pytest.param([TransportError("refused"), _error(503, "ServiceUnavailable"),
                      _error(429, "TooManyRequests"), _error(404, "NotFound")],
                     False, [0.5, 1.0, 2.0], id="retried-until-an-answer"),
        pytest.param([TransportError("refused")] * 8 + [_discovery("podgroups")], True,
                     [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0], id="backoff-capped"),
    ],
)
async def test_served_asks_until_the_answer_is_decisive(answers: list[Any], expected: bool,
                                                        sleeps: list[float]) -> None:
    kube = _Discovery(*answers)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    assert await served(kube, POD_GROUPS, sleep=sleep) is expected  # type: ignore[arg-type]
    assert slept == sleeps
    assert kube.paths == ["/apis/scheduling.k8s.io/v1beta1"] * len(answers)
    assert not kube.answers
