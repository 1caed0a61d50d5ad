"""Process entry point: run a service's main coroutine until it ends or a signal arrives.

    def main() -> None:
        run_service("claim-controller", Settings, serve)   # settings, logging, then run(serve(settings))

(what ``serve`` opens and closes: :mod:`draflow_runtime.servicecontext`).

SIGINT/SIGTERM cancel the main task, so ``finally`` blocks and ``async with`` exits run (stop informers,
release the lease, drain NATS, flush spans). Exit codes: 0 when main returns or a signal stopped it; 1 with
an ``service crashed`` error line (and traceback) when main raised; a second signal during shutdown exits
at once with 128+signal.

SIGHUP restarts the service in place: the same clean shutdown, then the process re-executes itself with
the same interpreter and arguments (same PID, so a container's PID 1 survives it) and so loads the Python
files as they are now. Tilt's live update in cluster mode syncs changed sources and sends it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn, TypeVar

from draflow_runtime.log import configure_logging, get_logger
from draflow_runtime.settings import EventLoop, ServiceSettings, load_settings

__all__ = ["run", "run_service", "supervise"]

S = TypeVar("S", bound=ServiceSettings)

log = get_logger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RESTART_EXIT = -1
"""What :func:`supervise` returns after SIGHUP: :func:`run` re-executes the process."""


async def supervise(main: Callable[[], Awaitable[None]]) -> int:
    """Run ``main()`` as a task with signal handlers installed; return the process exit code, or
    ``RESTART_EXIT`` when SIGHUP stopped it."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main())
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        if received:
            log.error("second signal, exiting immediately", signal=sig.name)
            os._exit(128 + sig.value)
        received.append(sig)
        log.info("shutting down", signal=sig.name)
        task.cancel()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await task
    except asyncio.CancelledError:
        if not received:
            raise
    except Exception as exc:
        log.error("service crashed", error=repr(exc), exc_info=exc)
        return 1
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
    if received == [signal.SIGHUP]:
        log.info("stopped, restarting in place", signal="SIGHUP")
        return RESTART_EXIT
    log.info("stopped", signal=received[0].name if received else None)
    return 0


def loop_factory(event_loop: EventLoop) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop the ``event_loop`` setting names (:class:`~.settings.ServiceSettings`)."""
    if event_loop == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Callable[[], Awaitable[None]], event_loop: EventLoop = "asyncio") -> NoReturn:
    """Run the service on the ``event_loop`` named and exit the process with :func:`supervise`'s code
    (SIGHUP: re-exec)."""
    with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
        code = runner.run(supervise(main))
    if code == RESTART_EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, sys.orig_argv)
    sys.exit(code)


def run_service(name: str, settings_cls: type[S], serve: Callable[[S], Awaitable[None]],
                argv: Sequence[str] | None = None) -> NoReturn:
    """A service's ``main()``: settings from flags/environment (``--help`` exits here), logging, then
    :func:`run` of ``serve(settings)`` on the event loop the settings name (uvloop by default)."""
    settings = load_settings(settings_cls, argv, prog=name)
    configure_logging(name, settings.log_level, settings.log_format)
    run(lambda: serve(settings), settings.event_loop)
