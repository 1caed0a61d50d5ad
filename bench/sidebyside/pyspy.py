"""Where draflow's services spend their CPU: ``side_by_side.py --py-spy DIR``.

While the measured phase runs, ``py-spy record`` (on PyPI, in the workspace's dev dependencies) samples
each Python process of the stack (claim-controller, structured-allocator) at ``RATE`` Hz into
``<workload>-<stack>-<service>.txt`` in py-spy's ``raw`` format (one line per distinct stack, its sample
count last: what flame-graph tools and ``summary`` read). Idle samples are left out (``--idle`` is not
given), so the shares are of the time a process was on the CPU or wanted it. Upstream's Go stacks have no
Python process: for them it records nothing (their CPU: ``--apiserver-profile``'s pprof works on the API
server only).

``summary(path)`` prints the functions with the largest share of a profile, by samples anywhere in the
stack ("cumulative") and by samples at the top ("self").
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections import Counter
from pathlib import Path

from draflow_testenv.process import ManagedProcess

RATE = 200
PYTHON_SERVICES = ("claim-controller", "structured-allocator")


class PySpy:
    """``py-spy record`` of each Python service of a stack between ``start()`` and ``stop()``."""

    def __init__(self, processes: dict[str, ManagedProcess], out: Path, label: str) -> None:
        self._targets = {n: p.pid for n, p in processes.items() if n in PYTHON_SERVICES and p.pid}
        self._out = out
        self._label = label
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self.paths: dict[str, Path] = {}

    async def start(self) -> None:
        self._out.mkdir(parents=True, exist_ok=True)
        exe = Path(sys.executable).with_name("py-spy")
        for name, pid in self._targets.items():
            path = self._out / f"{self._label}-{name}.txt"
            self._procs[name] = await asyncio.create_subprocess_exec(
                str(exe), "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
                "--nonblocking", "--output", str(path),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            self.paths[name] = path

    async def stop(self) -> None:
        """SIGINT makes py-spy write its file and exit."""
        for proc in self._procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        for proc in self._procs.values():
            await proc.wait()
        for path in self.paths.values():
            if path.exists():
                path.with_suffix(".summary.txt").write_text(summary(path))


def summary(path: Path, top: int = 40) -> str:
    """The ``top`` functions of a raw py-spy profile by cumulative and by self share of its samples."""
    cumulative: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for frame in set(frames):
            cumulative[frame] += n
        own[frames[-1]] += n
    if not total:
        return "no samples\n"
    lines = [f"{total} samples", "", "cumulative:"]
    lines += [f"{100 * n / total:5.1f}%  {f}" for f, n in cumulative.most_common(top)]
    lines += ["", "self:"]
    lines += [f"{100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    return "\n".join(lines) + "\n"
