"""What ``test_readme_examples`` reads from README.md and holds its commands' output to: the quick start's
and the *Try it* section's commands, the README's trace tables (claim -> services), the rules a printed
trace must keep, and running a command in a plain shell after ``source .draflow/env.sh``."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from draflow_runtime.claimtrace import ROOT_SPAN
from draflow_testenv.binaries import repo_root

SOURCE_LINE = "source .draflow/env.sh"
TRY_IT = "### Try it"
APPLY_EXTRAS = "kubectl apply -k deploy/demo/extras"
DELETE_EXTRAS = "kubectl delete -k deploy/demo/extras"
ONE_SHOT = {"status", "explain", "describe", "events", "trace"}  # subcommands that answer and exit
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
FAILURE_MARKERS = ("not found", "has no", "Traceback", "no answer", "no spans in Jaeger",
                   # a pool status' validation errors (the demo's pools are all well formed)
                   "PartitionTypeMissing:", "PartitionCostMismatch:", "SummaryOverCap:")
SERVICES = {"claim-controller", "structured-allocator", "slice-publisher", "kubelet-dra-shim",
            "reference-driver"}
# What the README says each *Try it* explanation shows: (subcommand, pod or claim) -> text in the output.
SHOWS = {("explain", "too-big"): "12 needed", ("explain", "legacy-gpus"): "allocated on node"}
HEADER = re.compile(r"^trace [0-9a-f]{32}: \d+ spans, (\d+) services \(([^)]*)\)", re.M)

Rows = dict[str, set[str]]  # claim name (or pod name / glob, for a generated claim) -> services


def _blocks(text: str) -> list[list[str]]:
    return [[line.strip() for line in block.splitlines() if line.strip()]
            for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S)]


def _readme(text: str | None) -> str:
    return text if text is not None else (repo_root() / "README.md").read_text()


def readme_commands(text: str | None = None) -> list[str]:
    """The commands of the README's fenced block that starts with ``source .draflow/env.sh``: every line
    that runs ``draflow`` or ``kubectl draflow``, its trailing ``# comment`` removed."""
    for lines in _blocks(_readme(text)):
        if lines and lines[0] == SOURCE_LINE:
            commands = [re.sub(r"\s+#.*$", "", line) for line in lines[1:]]
            return [c for c in commands if c.startswith(("draflow ", "kubectl draflow "))]
    raise AssertionError(f"README.md has no code block starting with {SOURCE_LINE!r}")


def try_it_commands(text: str | None = None) -> list[str]:
    """Every line of the README's *Try it* block (the one that starts with ``kubectl apply -k
    deploy/demo/extras``), its trailing ``# comment`` removed."""
    for lines in _blocks(_readme(text)):
        if lines and lines[0].startswith(APPLY_EXTRAS):
            return [re.sub(r"\s+#.*$", "", line) for line in lines]
    raise AssertionError(f"README.md has no code block starting with {APPLY_EXTRAS!r}")


def readme_trace_tables(text: str | None = None) -> tuple[Rows, Rows]:
    """(demo, try it): the README's table rows whose second cell lists services, before the *Try it*
    heading and within it. A row's first cell names its claims in backticks (for template claims, their
    pods, ``*`` a wildcard)."""
    text = _readme(text)
    start = text.index(f"\n{TRY_IT}\n")
    end = text.find("\n## ", start)
    parts = (text[:start], text[start:end if end >= 0 else len(text)])
    tables: list[Rows] = []
    for part in parts:
        rows: Rows = {}
        for first, second in re.findall(r"^\|([^|\n]+)\|([^|\n]+)\|", part, flags=re.M):
            services = {s.strip() for s in second.split(",")}
            if services <= SERVICES:
                rows.update({name: services for name in re.findall(r"`([a-z0-9*-]+)`", first)})
        tables.append(rows)
    return tables[0], tables[1]


def row_of(rows: Rows, name: str) -> set[str]:
    """The services of the one row naming ``name`` (a glob may); AssertionError unless exactly one."""
    found = [s for pattern, s in rows.items() if fnmatch.fnmatchcase(name, pattern)]
    assert len(found) == 1, f"{len(found)} rows of the README's table name {name!r}"
    return found[0]


def target_name(argv: list[str]) -> str:
    """The claim or pod a ``draflow explain|trace`` command names: ``ns/x``, ``pod/x``, ``x`` -> ``x``."""
    return argv[2].rpartition("/")[2]


def printed_traces(out: str) -> list[tuple[set[str], str]]:
    """Per ``trace`` header of `draflow trace`'s output (``trace <id>: N spans, M services (a, b)``, one
    per claim; a pod's claims each have theirs): its services and its root (the next line, ``"service
    operation"``)."""
    lines = out.splitlines()
    found = []
    for i, line in enumerate(lines):
        match = HEADER.match(line)
        if match:
            root = re.match(r"(\S+) \[([^\]]+)\]", lines[i + 1] if i + 1 < len(lines) else "")
            found.append((set(match.group(2).split(", ")), f"{root[2]} {root[1]}" if root else ""))
    return found


def problems_of(command: str, out: str, tables: tuple[Rows, Rows] | None = None) -> list[str]:
    """What is wrong with the output of one README command (empty: it works). A trace is held to the
    README's tables (``tables``: :func:`readme_trace_tables`): the *Try it* row of its claim, or else
    the demo's."""
    demo, try_it = tables or readme_trace_tables()
    problems = [f"prints {m!r}" for m in FAILURE_MARKERS if m in out]
    argv = shlex.split(command)
    if "-o" in argv and argv[argv.index("-o") + 1] == "json":
        try:
            json.loads(out)
        except ValueError:
            problems.append("-o json is not JSON")
    if argv[:2] == ["draflow", "trace"]:
        name = target_name(argv)
        traces = printed_traces(out)
        if not traces:
            problems.append(f"no trace printed: {out[:200]!r}")
        for services, root in traces:
            try:
                wrong = trace_wrong(services, [root], try_it[name]) if name in try_it else \
                    demo_trace_wrong(services, [root], row_of(demo, name))
            except AssertionError as exc:
                problems.append(str(exc))
                continue
            if wrong:
                problems.append(f"the trace of {name} has {sorted(services)} (root {root!r}), not what "
                                "the README's table says")
    if argv[:2] == ["draflow", "explain"]:
        shows = SHOWS.get(("explain", target_name(argv)))
        if shows and shows not in out:
            problems.append(f"the explanation does not show {shows!r}")
    if argv[:2] == ["draflow", "events"] and "allocated" not in out:
        problems.append("the claim's history has no allocation")
    if argv[:3] == ["draflow", "describe", "node"] and argv[3] not in out:
        problems.append("the node is not described")
    return problems


def trace_wrong(services: set[str], roots: list[str], want: set[str] | None) -> bool:
    """A claim's trace breaks the README's rule: not one root ("service operation"), or fewer than four
    services, or for a claim the README names (``want``) not exactly those. A user's claim the allocator
    saw first (its root the allocator's ``claim.seen``) has no claim-controller span: one fewer."""
    if len(roots) != 1:
        return True
    fewer = roots[0] == f"structured-allocator {ROOT_SPAN}"
    if want is not None:
        return services != want - ({"claim-controller"} if fewer else set())
    return len(services) < (3 if fewer else 4)


def demo_trace_wrong(services: set[str], roots: list[str], want: set[str]) -> bool:
    """A claim of ``make up``'s demo: one root and exactly the services of its README row, four or more
    (``make up`` creates the demo's pods once its claims have their roots: never one fewer)."""
    return len(roots) != 1 or len(want) < 4 or services != want


async def run_in_shell(env_file: Path, command: str, kubectl_dir: Path) -> tuple[int, str, str]:
    """``source env.sh && command`` in bash in the repository (the README's relative paths), from a PATH
    without this test's virtualenv (env.sh must bring ``draflow``), with kubectl on it as the README
    asks."""
    venv_bin = str(Path(sys.executable).parent)
    path = ":".join(d for d in os.environ.get("PATH", "/usr/bin:/bin").split(":") if d and d != venv_bin)
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{kubectl_dir}:{path}"}
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", f"source {shlex.quote(str(env_file))} && {command}", env=env, cwd=repo_root(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


def demo_name(claim: dict[str, Any]) -> str:
    """The name the README's tables give a claim: a user's claim its own, a claim generated for a pod (from
    a template, or the special claim of extended resources) its pod's."""
    meta = claim["metadata"]
    owner = next((r["name"] for r in meta.get("ownerReferences") or () if r.get("kind") == "Pod"), None)
    return str(owner or meta["name"])


async def run_until_each_works(env_file: Path, commands: list[str], kubectl_dir: Path,
                               tables: tuple[Rows, Rows]) -> dict[str, list[str]]:
    """Run every command in order until it works (spans reach Jaeger in batches: a command may need a
    second run, as a user would give it); -> the failing ones with their problems and output."""
    from draflow_testenv.wait import eventually

    results: dict[str, list[str]] = {}
    for command in commands:
        async def works(command: str = command) -> bool:
            code, out, err = await run_in_shell(env_file, command, kubectl_dir)
            results[command] = ([f"exit {code}"] if code else []) + problems_of(command, out, tables) + \
                ([f"writes to stderr: {err[-300:]}"] if err.strip() else []) + \
                [f"stdout: {out[:800]}", f"stderr: {err[-400:]}"]
            return len(results[command]) == 2
        with contextlib.suppress(AssertionError):  # reported by the caller, with every other failing one
            await eventually(works, 60, f"README example {command!r}", interval=2.0)
    return {c: p for c, p in results.items() if len(p) > 2}
