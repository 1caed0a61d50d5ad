"""The allocator's ``/explain`` and ``/ui`` endpoints and the ``draflow`` CLI asked odd things by an
outsider: unknown and very long claim names, missing or huge query parameters, names that are not names.
Every answer is a clear one (a 4xx JSON/text naming what was asked; the CLI exits non-zero with one line
on stderr, never a Python traceback), and the services keep serving."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from badinput_kit import DRIVER, Stack

from draflow_cli.__main__ import main

pytestmark = pytest.mark.integration

LONG = "x" * 5000


async def _get(stack: Stack, path: str, method: str = "GET") -> tuple[int, Any]:
    port = stack.flow.http_ports["structured-allocator"]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session, \
            session.request(method, f"http://127.0.0.1:{port}{path}") as resp:
        body = await resp.read()
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, body.decode(errors="replace")


async def test_explain_of_unknown_long_and_odd_claim_names_is_a_404_naming_it(stack: Stack) -> None:
    for name in ("no-such-claim", LONG[:253], "a%2Fb", "%00", quote("ünïcode", safe="")):
        status, body = await _get(stack, f"/explain/{stack.ns}/{name}")
        assert status == 404, (name, status, body)
        assert isinstance(body, dict) and body["claim"].startswith(f"{stack.ns}/"), body
        assert "no explanation" in body["message"], body
    status, body = await _get(stack, f"/explain/{stack.ns}/{LONG}")  # longer than any object name
    assert status in (404, 414), (status, body)
    status, body = await _get(stack, "/explain?limit=-1&namespace=" + LONG)
    assert status == 200 and isinstance(body["items"], list), body
    status, _ = await _get(stack, f"/explain/{stack.ns}/x", method="POST")
    assert status == 405
    await stack.still_serving()


async def test_ui_device_with_missing_unknown_or_huge_parameters_is_a_clear_4xx(stack: Stack) -> None:
    status, body = await _get(stack, "/ui/device")
    assert status == 400 and "driver, pool and device are required" in body["message"], body
    status, body = await _get(stack, "/ui/device?driver=&pool=&device=")
    assert status == 400, body
    status, body = await _get(stack, f"/ui/device?driver={DRIVER}&pool=no-pool&device=no-device")
    assert status == 404 and "no-pool/no-device" in body["message"], body
    status, body = await _get(stack, f"/ui/device?driver={LONG[:2000]}&pool=p&device=d&driver=again")
    assert status == 404, (status, body)
    status, body = await _get(stack, f"/ui/device?driver={LONG}&pool={LONG}&device={LONG}")
    assert status in (400, 414) and "8190" in body, (status, body)  # aiohttp's request-line limit
    status, body = await _get(stack, "/ui/state.json?x=" + LONG)
    assert status == 200 and isinstance(body, dict) and "leader" in body, body
    status, body = await _get(stack, "/ui/../explain")
    assert status in (200, 404), (status, body)
    await stack.still_serving()


def _draflow(stack: Stack, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``draflow argv`` as the installed script runs it (``main``: exit code, stdout, stderr), in a thread
    (it runs its own event loop)."""
    port = stack.flow.http_ports["structured-allocator"]
    testenv = stack.flow.testenv
    capsys.readouterr()
    code = main(["--kubeconfig", str(testenv.kubeconfig), "--allocator-url", f"http://127.0.0.1:{port}",
                 "--nats-url", testenv.nats_url, "--jaeger-url", testenv.jaeger_query_url, *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "code", "reason"), [
    # Before: explain of a claim or pod that does not exist printed "... not found" and exited 0.
    (("explain", "{ns}/no-such-claim"), 1, "draflow explain: claim {ns}/no-such-claim not found"),
    (("explain", "pod/no-such-pod", "-n", "{ns}"), 1, "draflow explain: pod {ns}/no-such-pod not found"),
    (("explain", "a/b/c"), 1, "expected [<namespace>/]<name>, got 'a/b/c'"),
    (("trace", "/nameless"), 2, "expected [<namespace>/]<name>, got '/nameless'"),
    (("describe", "node", LONG), 1, f"draflow describe: node '{LONG}': no Node"),
], ids=["explain-unknown-claim", "explain-unknown-pod", "explain-three-parts", "trace-no-name",
        "describe-long-name"])
async def test_the_cli_answers_odd_arguments_with_one_reason_and_an_exit_code(
    stack: Stack, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], code: int, reason: str,
) -> None:
    argv = tuple(a.replace("{ns}", stack.ns) for a in argv)
    got, out, err = await asyncio.to_thread(_catching_exit, _draflow, stack, capsys, *argv)
    assert (got, out) == (code, ""), (got, out, err)
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]  # argparse prints its usage first
    assert reason.replace("{ns}", stack.ns) in last, err


def _catching_exit(fn: Any, *args: Any) -> tuple[int, str, str]:
    try:
        result: tuple[int, str, str] = fn(*args)
    except SystemExit as exc:  # argparse: usage error, exit 2
        capsys = args[1]
        out, err = capsys.readouterr()
        return int(exc.code or 0), out, err
    return result
