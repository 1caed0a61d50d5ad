"""run(): signals stop a service cleanly with exit code 0; a crash exits non-zero with a log line."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys
    from draflow_runtime.log import configure_logging
    from draflow_runtime.service import run

    configure_logging("svc", "info")

    async def main():
        if sys.argv[1] == "crash":
            raise RuntimeError("boom")
        try:
            print("ready", flush=True)
            await asyncio.Event().wait()
        finally:
            print("cleaned up", flush=True)

    run(main)
    """
)


async def start(mode: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROGRAM, mode, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def stop_with(sig: signal.Signals) -> tuple[int, str, str]:
    proc = await start("serve")
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).strip() == b"ready"
    proc.send_signal(sig)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_sigterm_cancels_main_runs_cleanup_and_exits_zero() -> None:
    code, out, err = await stop_with(signal.SIGTERM)
    assert code == 0
    assert "cleaned up" in out
    assert '"event": "shutting down"' in err and "SIGTERM" in err


async def test_sigint_exits_zero() -> None:
    code, out, _ = await stop_with(signal.SIGINT)
    assert code == 0
    assert "cleaned up" in out


async def test_crash_exits_non_zero_with_a_clear_log_line() -> None:
    proc = await start("crash")
    _, raw = await proc.communicate()
    err = raw.decode()
    assert proc.returncode == 1
    assert '"event": "service crashed"' in err
    assert "RuntimeError: boom" in err
