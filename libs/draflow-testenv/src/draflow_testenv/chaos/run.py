"""The chaos run: start the stack, churn pods, inject each fault, check the invariants all along and
after settling, print a table and ``chaos: V violations in F faults``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from draflow_runtime.kube import KubeClient
from draflow_testenv.environment import Environment
from draflow_testenv.flow import NODE_PREFIX, _nodes_ready
from draflow_testenv.wait import eventually

from . import faults as fault_mod
from .checks import CONTINUOUS, SETTLED, run_checks
from .churn import Churn, extended_names
from .claimkinds import History
from .invariants import Snapshot
from .stack import LEASE_NAMESPACE, Stack, ensure_namespace, retry, snapshot
from .traceroots import fetch_roots, trace_root_violations

NAMESPACE = "draflow-chaos"
TRACE_EXPORT_DELAY = 7.0  # the services' BatchSpanProcessor exports every 5 s


@dataclass
class Row:
    fault: str
    at: float
    recovered: float | None = None
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the fault measured (takeover times)


@dataclass
class Options:
    nodes: int = 20
    gpus: int = 8
    short: bool = False
    nats_outage: float = 30.0
    gap: float = 10.0  # seconds of churn between two faults
    settle_timeout: float = 240.0


def _print(msg: str) -> None:
    print(msg, flush=True)


class Runner:
    def __init__(self, env: Environment, opts: Options) -> None:
        self.env, self.opts = env, opts
        self.stack = Stack(env)
        self.rows: list[Row] = [Row("(baseline churn)", 0.0)]
        self.t0 = time.monotonic()
        self._suspects: set[str] = set()
        self.history = History()
        self.extended = extended_names()
        self.snapshots = 0  # continuous snapshots checked
        self.roots = 0  # claim.seen spans found in Jaeger

    @property
    def row(self) -> Row:
        return self.rows[-1]

    def _record(self, msgs: list[str]) -> None:
        for msg in msgs:
            if msg not in self.row.violations:
                self.row.violations.append(msg)
                _print(f"    VIOLATION {msg}")

    async def _monitor(self, kube: KubeClient) -> None:
        """Every 2 s: unplanned exits, and the continuous invariants (a violation counts when two
        consecutive snapshots show it: a list is not atomic across resources)."""
        while True:
            self._record(self.stack.check_alive())
            try:
                snap = await snapshot(kube, NAMESPACE, None, [], self.extended)
            except Exception:  # the API server may be down: a fault is running
                pass
            else:
                found = set(run_checks(snap, CONTINUOUS))
                self.snapshots += 1
                self._observe(snap)
                self._record(sorted(found & self._suspects))
                self._suspects = found
            await asyncio.sleep(2)  # the sampling period, not a wait for a condition

    def _observe(self, snap: Snapshot) -> None:
        """The history checks (a check that raises is a violation: it must never stop checking)."""
        try:
            self._record([f"history: {m}" for m in self.history.observe(snap)])
        except Exception as exc:
            self._record([f"history: raised {type(exc).__name__}: {exc}"])

    async def _churn(self, churn: Churn) -> None:
        while True:
            await churn.step()
            await asyncio.sleep(1)

    async def _probe(self, churn: Churn) -> float:
        """Seconds until a new partition pod runs (the stack serves again)."""
        t0 = time.monotonic()
        base = await retry(lambda: churn.add_probe())

        async def running() -> bool:
            return await churn.running(base)

        await eventually(running, 300, f"probe pod {base} Running", interval=0.5)
        await retry(lambda: churn.remove_probe(base))
        return time.monotonic() - t0

    async def run(self) -> int:
        opts = self.opts
        kube = await KubeClient.from_kubeconfig(str(self.env.kubeconfig))
        for ns in (NAMESPACE, LEASE_NAMESPACE):
            await ensure_namespace(kube, ns)
        await self.stack.start(opts.nodes, opts.gpus)
        self.stack.nodes = [f"{NODE_PREFIX}{i}" for i in range(opts.nodes)]

        async def ready() -> bool:
            return await _nodes_ready(kube, opts.nodes) == (opts.nodes, opts.nodes)

        await eventually(ready, 300, "every node Ready with slices", interval=1, abort=self._abort)
        _print(f"chaos: {opts.nodes} nodes x {opts.gpus} GPUs ready after {self._now():.0f}s; "
               f"logs in {self.env.logs_dir}")
        churn = Churn(kube, NAMESPACE, self.stack.nodes, opts.gpus)
        await churn.setup()
        ctx = fault_mod.Ctx(self.env, self.stack, kube, namespace=NAMESPACE, nats_outage=opts.nats_outage,
                            churn=churn)
        tasks = [asyncio.create_task(self._monitor(kube)), asyncio.create_task(self._churn(churn))]
        try:
            await asyncio.sleep(opts.gap * 2)
            for name, fault in fault_mod.catalogue(opts.short):
                self.rows.append(Row(name, self._now()))
                ctx.notes = self.row.notes
                _print(f"  [{self._now():6.1f}s] fault: {name}")
                try:
                    await fault(ctx)
                    self.row.recovered = await self._probe(churn)
                except Exception as exc:  # a fault that does not recover is a violation of its own
                    self._record([f"not recovered: {type(exc).__name__}: {exc}"])
                rec = "-" if self.row.recovered is None else f"{self.row.recovered:.1f}s"
                _print(f"  [{self._now():6.1f}s]   recovered after {rec}")
                await asyncio.sleep(opts.gap)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.rows.append(Row("(settle)", self._now()))
        await retry(churn.stop_and_fill)
        await self._settle(kube)
        await self._trace_roots(kube)
        self._record(self.stack.check_alive())
        await kube.close()
        self._table(churn)
        return sum(len(r.violations) for r in self.rows)

    async def _settle(self, kube: KubeClient) -> None:
        """Until the settled invariants hold (then record nothing) or the timeout (record what is left)."""
        t0, last = time.monotonic(), []
        while time.monotonic() - t0 < self.opts.settle_timeout:
            try:
                snap = await snapshot(kube, NAMESPACE, self.stack.fleet, self.stack.nodes, self.extended)
                self._observe(snap)
                last = run_checks(snap, SETTLED)
            except Exception as exc:
                last = [f"snapshot failed: {exc}"]
            if not last:
                self.row.recovered = time.monotonic() - t0
                return
            await asyncio.sleep(2)
        self._record(last)

    async def _trace_roots(self, kube: KubeClient) -> None:
        """Jaeger holds at most one trace root per claim, the one its annotation names (spans are exported
        in batches every 5 s: wait for the last ones first)."""
        await asyncio.sleep(TRACE_EXPORT_DELAY)
        try:
            roots = await fetch_roots(self.env.jaeger_query_url, NAMESPACE)
            snap = await snapshot(kube, NAMESPACE, None, [])
        except Exception as exc:
            self._record([f"trace roots: Jaeger or the API server did not answer: {exc}"])
            return
        self.roots = len(roots)
        self._record([f"trace_roots_in_jaeger: {m}" for m in trace_root_violations(snap.claims, roots)])

    def _abort(self) -> None:
        dead = self.stack.check_alive()
        assert not dead, dead

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _table(self, churn: Churn) -> None:
        _print("")
        _print(f"{'FAULT':<48} {'AT':>7} {'RECOVERED AFTER':>16} VIOLATIONS")
        for r in self.rows:
            rec = "-" if r.recovered is None else f"{r.recovered:.1f}s"
            _print(f"{r.fault:<48} {r.at:6.0f}s {rec:>16} {len(r.violations)}")
            for n in r.notes:
                _print(f"    - {n}")
            for v in r.violations:
                _print(f"    {v}")
        faults = len(self.rows) - 2
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(churn.by_kind.items()))
        _print(f"churn: {churn.created} pods created ({kinds} groups; {churn.replaced} members replaced; "
               f"{churn.flashes} groups deleted at once), "
               f"{churn.deleted} deleted, {churn.errors} failed ticks; "
               f"{self.snapshots} snapshots checked, {self.roots} claim.seen roots in Jaeger; "
               f"{self._now():.0f}s in all")
        _print(f"chaos: {sum(len(r.violations) for r in self.rows)} violations in {faults} faults")


async def main(opts: Options) -> int:
    async with Environment() as env:
        return await Runner(env, opts).run()
