"""The README's examples work as printed: the commands of its quick start and of its *Try it* section, read
from README.md (so the test follows the README), typed into a plain shell from the repository after
``source .draflow/env.sh`` against a ``make up``-like environment with the demo applied. Every claim of
``make up``'s demo has one trace in Jaeger with spans of at least four services, exactly those the README's
table names; the *Try it* claims (applied by the README's own ``kubectl apply -k deploy/demo/extras``)
hold exactly what its second table says: the claim that fits on no node, and the extended resource claim,
which the claim-controller does not touch before its clean-up."""

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

import pytest

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


def test_the_readme_lists_the_examples_this_test_runs() -> None:
    commands = [*readme_commands(), *(c for c in try_it_commands() if not c.startswith("kubectl "))]
    subcommands = {shlex.split(c)[1 if c.startswith("draflow") else 2] for c in commands}
    assert {"status", "explain", "describe", "events", "trace"} <= subcommands, commands
    # A command this test does not know may not end by itself (``draflow ui`` serves until Ctrl-C):
    # teach problems_of / run_in_shell how to check it before the README shows it here.
    assert subcommands <= ONE_SHOT, f"README example(s) {sorted(subcommands - ONE_SHOT)} not checked here"
    assert any(c.startswith("kubectl draflow ") for c in readme_commands()), readme_commands()
    try_it = try_it_commands()
    assert (try_it[0], try_it[-1]) == (APPLY_EXTRAS, DELETE_EXTRAS), try_it
    assert all(c.startswith("draflow ") for c in try_it[1:-1]), try_it


def test_comments_are_stripped_and_other_blocks_ignored() -> None:
    text = "```bash\nmake up\n```\n\n```bash\nsource .draflow/env.sh\ndraflow status   # a # comment\n" \
           "echo hi\nkubectl draflow status -o json\n```\n" \
           f"```bash\n{APPLY_EXTRAS}   # extras\ndraflow trace x\n{DELETE_EXTRAS}\n```\n"
    assert readme_commands(text) == ["draflow status", "kubectl draflow status -o json"]
    assert try_it_commands(text) == [APPLY_EXTRAS, "draflow trace x", DELETE_EXTRAS]


def test_the_readme_tables_give_the_demo_four_services_and_name_the_try_it_claims() -> None:
    from draflow_testenv.flow import demo_extras, demo_objects

    demo, try_it = readme_trace_tables()
    assert try_it == {
        "too-big": {"claim-controller", "structured-allocator"},
        "legacy-gpus": {"structured-allocator", "kubelet-dra-shim", "reference-driver"},
    }
    assert demo and all(len(services) >= 4 for services in demo.values()), demo
    # Every claim deploy/demo makes has its row: a user's claim by name, a template claim by its pod's.
    objects = demo_objects()
    named = [o["metadata"]["name"] for o in objects if o["kind"] == "ResourceClaim"]
    templated = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"
                 if any(c.get("resourceClaimTemplateName") for c in o["spec"].get("resourceClaims") or ())]
    assert named == ["shared-gpu"] and len(templated) == 11, (named, templated)
    assert {n: len(row_of(demo, n)) for n in [*named, *templated]} == dict.fromkeys([*named, *templated], 4)
    # ... and the README's claims that cannot reach four are exactly what deploy/demo/extras makes.
    extras = {o["metadata"]["name"] for o in demo_extras() if o["kind"] in ("ResourceClaim", "Pod")}
    assert extras == set(try_it), extras
    assert not {o["metadata"]["name"] for o in objects} & extras


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


def test_problems_of_holds_a_trace_to_the_readme_s_table() -> None:
    four = {"claim-controller", "structured-allocator", "kubelet-dra-shim", "reference-driver"}
    tables = ({"shared-gpu": four}, {"too-big": {"claim-controller", "structured-allocator"}})

    def trace(services: set[str], root: str) -> str:
        return f"trace {'a' * 32}: 5 spans, {len(services)} services ({', '.join(sorted(services))}), 1ms\n" \
               f"{root} 1.0ms (+0.0ms)\n"

    good = trace(four, "claim.seen [claim-controller]")
    assert problems_of("draflow trace draflow-demo/shared-gpu", good, tables) == []
    assert problems_of("draflow trace draflow-demo/shared-gpu", trace(four - {"claim-controller"},
                       "claim.seen [structured-allocator]"), tables)  # the demo's: never fewer
    pod = "pod draflow-demo/p: 1 claim(s)\n\n--- gpu (claim too-big)\n" + \
        trace({"claim-controller", "structured-allocator"}, "claim.seen [claim-controller]")
    assert problems_of("draflow trace pod/too-big -n draflow-demo", pod, tables) == []
    alone = trace({"structured-allocator"}, "claim.seen [structured-allocator]")
    assert problems_of("draflow trace draflow-demo/too-big", alone, tables) == []  # the README's "alone"
    assert problems_of("draflow trace draflow-demo/too-big", good, tables)
    assert problems_of("draflow trace draflow-demo/too-big", "no trace", tables)
    assert problems_of("draflow explain draflow-demo/too-big", "claim too-big\n\nnot allocated", tables)
    assert problems_of("draflow explain pod/too-big -n x", "... 12 needed ...", tables) == []


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


def test_a_demo_trace_needs_one_root_and_four_services_or_exactly_the_readme_s() -> None:
    four = {"claim-controller", "structured-allocator", "kubelet-dra-shim", "reference-driver"}
    by_cc, by_sa = ["claim-controller claim.seen"], ["structured-allocator claim.seen"]
    assert not trace_wrong(four, ["claim-controller claim.create"], None)
    assert trace_wrong(four - {"reference-driver"}, by_cc, None)
    assert trace_wrong(four, [*by_cc, "kubelet-dra-shim prepare pod"], None)  # two roots
    assert not trace_wrong(four - {"claim-controller"}, by_sa, None)  # the allocator was first
    assert trace_wrong(four - {"claim-controller"}, ["structured-allocator claim.create"], None)
    pending = {"claim-controller", "structured-allocator"}
    assert not trace_wrong(pending, by_cc, pending)
    assert trace_wrong(pending | {"kubelet-dra-shim"}, by_cc, pending)  # exactly, not at least
    assert not trace_wrong({"structured-allocator"}, by_sa, pending)
    assert trace_wrong({"structured-allocator"}, by_cc, pending)
    assert not demo_trace_wrong(four, by_cc, four)
    assert demo_trace_wrong(four - {"claim-controller"}, by_sa, four)  # the demo's: never one fewer
    assert demo_trace_wrong(four, [*by_cc, *by_sa], four)
    assert demo_trace_wrong(pending, by_cc, pending)  # a demo row of fewer than four breaks the rule


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


@pytest.mark.integration
@pytest.mark.timeout(900)
async def test_the_readme_examples_work_as_printed_against_the_demo() -> None:
    """`make up`'s two steps in an environment of their own (a second allocator on the shared test
    environment would schedule other tests' pods), then every quick-start command, the demo's traces, then
    the *Try it* commands (the README's own ``kubectl apply -k``) and their claims' traces."""
    import argparse
    from contextlib import AsyncExitStack

    from draflow_cli.trace import build_tree, fetch_trace, trace_id_of
    from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
    from draflow_testenv.binaries import ensure_binary
    from draflow_testenv.environment import Environment
    from draflow_testenv.flow import DEMO_NAMESPACE, EXTENDED_POD, STEPS, UNFIT_CLAIM
    from draflow_testenv.wait import eventually

    kubectl_dir = (await ensure_binary("kubectl")).parent  # the README: "kubectl on PATH"
    tables = readme_trace_tables()
    demo_rows, try_it_rows = tables
    args = argparse.Namespace(nodes=2, gpus=8, demo_timeout=240.0)
    async with Environment(nodes=2, secure_nats=True) as env, AsyncExitStack() as stack:
        for _, step in STEPS:
            await stack.enter_async_context(step(env, args))
        failing = await run_until_each_works(env.env_file, readme_commands(), kubectl_dir, tables)
        assert not failing, json.dumps(failing, indent=1)
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        stack.push_async_callback(kube.close)

        async def claims() -> list[dict[str, Any]]:
            return list((await kube.list(RESOURCE_CLAIMS, namespace=DEMO_NAMESPACE))["items"])

        seen: dict[str, tuple[set[str], list[str]]] = {}  # claim -> (services, roots as "service op")

        async def traced(claim: dict[str, Any]) -> None:
            doc = await fetch_trace(env.jaeger_query_url, trace_id_of(claim)) or {}
            procs = doc.get("processes") or {}
            services = {procs[s["processID"]]["serviceName"] for s in doc.get("spans") or ()}
            seen[claim["metadata"]["name"]] = (services, [f"{r.service} {r.name}" for r in build_tree(doc)])

        # Every claim of the demo is allocated and has one trace in Jaeger with exactly the services of
        # its README row, four or more.
        demo = await claims()
        assert [c["metadata"]["name"] for c in demo if not (c.get("status") or {}).get("allocation")] == []
        want = {c["metadata"]["name"]: row_of(demo_rows, demo_name(c)) for c in demo}

        def demo_wrong() -> dict[str, Any]:
            return {n: (sorted(s), roots) for n, (s, roots) in seen.items()
                    if demo_trace_wrong(s, roots, want[n])}

        async def every_demo_claim_traced() -> bool:
            for c in demo:
                await traced(c)
            return not demo_wrong()

        with contextlib.suppress(AssertionError):  # the assertion below names the claims
            await eventually(every_demo_claim_traced, 90, "traces of the demo's claims", interval=2.0)
        assert demo_wrong() == {} and len(seen) == len(demo) == 12, seen

        # Try it: the README's commands as printed, the clean-up last.
        commands = try_it_commands()
        failing = await run_until_each_works(env.env_file, commands[:-1], kubectl_dir, tables)
        assert not failing, json.dumps(failing, indent=1)
        extras = [c for c in await claims() if c["metadata"]["name"] not in want]
        assert sorted(demo_name(c) for c in extras) == sorted(try_it_rows) == [EXTENDED_POD, UNFIT_CLAIM]
        (extended,) = [c for c in extras
                       if (c["metadata"].get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true"]
        seen.clear()
        extra_want = {c["metadata"]["name"]: try_it_rows[demo_name(c)] for c in extras}

        def extras_wrong() -> dict[str, Any]:
            return {n: (sorted(s), roots) for n, (s, roots) in seen.items()
                    if trace_wrong(s, roots, extra_want[n])}

        async def every_extra_traced() -> bool:
            for c in extras:
                await traced(c)
            return not extras_wrong()

        with contextlib.suppress(AssertionError):
            await eventually(every_extra_traced, 90, "traces of the Try it claims", interval=2.0)
        assert extras_wrong() == {}, seen

        # As the README says: the claim-controller's part in the extended resource claim is its clean-up
        # once the pod is gone (the README's `kubectl delete -k`); then the claim's trace has four services.
        failing = await run_until_each_works(env.env_file, commands[-1:], kubectl_dir, tables)
        assert not failing, json.dumps(failing, indent=1)

        async def cleaned_up() -> set[str]:
            doc = await fetch_trace(env.jaeger_query_url, trace_id_of(extended)) or {}
            procs = doc.get("processes") or {}
            ops = {(procs[s["processID"]]["serviceName"], s["operationName"])
                   for s in doc.get("spans") or ()}
            assert ("claim-controller", "claim.cleanup") in ops, sorted(ops)
            return {service for service, _ in ops}

        services = await eventually(cleaned_up, 90, "the extended claim cleaned up", interval=2.0)
        assert services == {"claim-controller", "structured-allocator", "kubelet-dra-shim",
                            "reference-driver"}

        async def extras_gone() -> bool:  # and the demo as make up left it
            pods = {p["metadata"]["name"] for p in (await kube.list(PODS, namespace=DEMO_NAMESPACE))["items"]}
            return {c["metadata"]["name"] for c in await claims()} == set(want) and \
                not pods & {EXTENDED_POD, UNFIT_CLAIM}

        await eventually(extras_gone, 90, "the Try it pods and claims gone", interval=1.0)
