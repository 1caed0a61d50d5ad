"""Mapping of Kubernetes Status bodies to the typed ApiError tree."""

from __future__ import annotations

import orjson
import pytest

from draflow_runtime import errors
from draflow_runtime.errors import api_error_from_status


def status(code: int, reason: str, message: str = "msg", **details: object) -> bytes:
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "code": code, "reason": reason, "message": message}
    if details:
        body["details"] = details
    return orjson.dumps(body)


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        pytest.param(400, "BadRequest", errors.BadRequest, id="bad-request"),
        pytest.param(401, "Unauthorized", errors.Unauthorized, id="unauthorized"),
        pytest.param(403, "Forbidden", errors.Forbidden, id="forbidden"),
        pytest.param(404, "NotFound", errors.NotFound, id="not-found"),
        pytest.param(409, "AlreadyExists", errors.AlreadyExists, id="already-exists"),
        pytest.param(409, "Conflict", errors.Conflict, id="conflict"),
        pytest.param(410, "Expired", errors.Gone, id="expired-is-gone"),
        pytest.param(410, "Gone", errors.Gone, id="gone"),
        pytest.param(422, "Invalid", errors.Invalid, id="invalid"),
        pytest.param(429, "TooManyRequests", errors.TooManyRequests, id="too-many-requests"),
        pytest.param(504, "Timeout", errors.Timeout, id="timeout"),
        pytest.param(500, "ServerTimeout", errors.Timeout, id="server-timeout"),
        pytest.param(500, "InternalError", errors.ServerError, id="internal-error"),
        pytest.param(503, "ServiceUnavailable", errors.ServerError, id="unavailable"),
        pytest.param(405, "MethodNotAllowed", errors.ApiError, id="other-4xx"),
    ],
)
def test_status_reason_and_code_choose_the_class(code: int, reason: str, expected: type) -> None:
    err = api_error_from_status(code, status(code, reason, "the message"))
    assert type(err) is expected
    assert isinstance(err, errors.ApiError)
    assert isinstance(err, errors.DraflowError)
    assert (err.status, err.reason, err.message) == (code, reason, "the message")


def test_already_exists_is_a_conflict() -> None:
    assert isinstance(api_error_from_status(409, status(409, "AlreadyExists")), errors.Conflict)


def test_invalid_carries_field_causes() -> None:
    causes = [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.driver"}]
    err = api_error_from_status(
        422, status(422, "Invalid", name="s1", kind="ResourceSlice", causes=causes)
    )
    assert isinstance(err, errors.Invalid)
    assert err.causes == causes
    assert err.details["name"] == "s1"
    assert err.body is not None and err.body["kind"] == "Status"


def test_too_many_requests_carries_retry_after() -> None:
    err = api_error_from_status(429, status(429, "TooManyRequests", retryAfterSeconds=3))
    assert isinstance(err, errors.TooManyRequests)
    assert err.retry_after == 3.0


def test_decoded_watch_error_status_maps_like_bytes() -> None:
    body = orjson.loads(status(410, "Expired", "too old resource version: 1 (42)"))
    err = api_error_from_status(body["code"], body)
    assert isinstance(err, errors.Gone)
    assert "too old" in err.message


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        pytest.param(404, b"", errors.NotFound, id="empty-body"),
        pytest.param(502, b"<html>bad gateway</html>", errors.ServerError, id="html-body"),
        pytest.param(410, None, errors.Gone, id="no-body"),
        pytest.param(418, b"[1, 2]", errors.ApiError, id="json-not-a-status"),
    ],
)
def test_non_status_bodies_still_give_typed_errors(code: int, body: bytes | None, expected: type) -> None:
    err = api_error_from_status(code, body)
    assert type(err) is expected
    assert err.status == code
    assert err.causes == []


def test_html_body_becomes_the_message() -> None:
    assert "bad gateway" in api_error_from_status(502, b"<html>bad gateway</html>").message
