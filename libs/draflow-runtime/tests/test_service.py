"""run(): signals stop a service cleanly with exit code 0, on either event loop; a crash exits non-zero
with a log line; SIGHUP restarts it in place with the code as it is on disk now."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = textwrap.dedent(
    """
    import asyncio, os, sys
    from draflow_runtime.log import configure_logging
    from draflow_runtime.service import run

    configure_logging("svc", "info")

    async def main():
        if sys.argv[1] == "crash":
            raise RuntimeError("boom")
        if sys.argv[1] == "reload":
            sys.path.insert(0, sys.argv[2])
            import reloadme
            print("version", os.getpid(), reloadme.VERSION, flush=True)
        if sys.argv[1] == "loop":
            print("loop", type(asyncio.get_running_loop()).__module__, flush=True)
        try:
            print("ready", flush=True)
            await asyncio.Event().wait()
        finally:
            print("cleaned up", flush=True)

    run(main, *sys.argv[2:3] if sys.argv[1] == "loop" else ())
    """
)


async def start(mode: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROGRAM, mode, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
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


@pytest.mark.parametrize(("setting", "module"), [("uvloop", "uvloop"), ("asyncio", "asyncio.unix_events")])
async def test_the_event_loop_setting_names_the_loop_and_a_signal_stops_it(setting: str, module: str) -> None:
    proc = await start("loop", setting)
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).split() == [b"loop", module.encode()]
    assert (await proc.stdout.readline()).strip() == b"ready"
    proc.send_signal(signal.SIGTERM)
    out, err = await proc.communicate()
    assert proc.returncode == 0 and b"cleaned up" in out, err.decode()


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


async def test_sighup_shuts_down_cleanly_and_runs_again_with_the_new_code(tmp_path: Path) -> None:
    module = tmp_path / "reloadme.py"
    module.write_text("VERSION = 1\n")
    proc = await start("reload", str(tmp_path))
    assert proc.stdout is not None
    first = (await proc.stdout.readline()).split()
    assert first[0] == b"version" and first[2] == b"1"
    assert (await proc.stdout.readline()).strip() == b"ready"

    module.write_text("VERSION = 2\n")  # what Tilt's live update syncs, before it sends SIGHUP
    proc.send_signal(signal.SIGHUP)
    assert (await proc.stdout.readline()).strip() == b"cleaned up"
    second = (await proc.stdout.readline()).split()
    assert second == [b"version", first[1], b"2"], "same process (PID), new code"
    assert (await proc.stdout.readline()).strip() == b"ready"

    proc.send_signal(signal.SIGTERM)
    out, err = await proc.communicate()
    assert proc.returncode == 0 and b"cleaned up" in out
    assert b"restarting in place" in err
