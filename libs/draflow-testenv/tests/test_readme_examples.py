"""The README's examples work as printed: the ``draflow ...`` commands of its quick start, read from
README.md (so the test follows the README), typed into a plain shell after ``source .draflow/env.sh``
against a ``make up``-like environment with the demo applied. And every claim of the demo has one trace in
Jaeger, as `draflow trace` prints it, with spans of at least four services, except the claims the README
names with exactly the services their traces hold (the extended resource claim, which the
claim-controller does not touch before its clean-up, and the claim that cannot fit)."""

from __future__ import annotations

import asyncio
import contextlib
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
ONE_SHOT = {"status", "explain", "describe", "events", "trace"}  # subcommands that answer and exit
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
FAILURE_MARKERS = ("not found", "has no", "Traceback", "no answer", "no spans in Jaeger")
SERVICES = {"claim-controller", "structured-allocator", "slice-publisher", "kubelet-dra-shim",
            "reference-driver"}


def readme_commands(text: str | None = None) -> list[str]:
    """The commands of the README's fenced block that starts with ``source .draflow/env.sh``: every line
    that runs ``draflow`` or ``kubectl draflow``, its trailing ``# comment`` removed."""
    text = text if text is not None else (repo_root() / "README.md").read_text()
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if lines and lines[0] == SOURCE_LINE:
            commands = [re.sub(r"\s+#.*$", "", line) for line in lines[1:]]
            return [c for c in commands if c.startswith(("draflow ", "kubectl draflow "))]
    raise AssertionError(f"README.md has no code block starting with {SOURCE_LINE!r}")


def test_the_readme_lists_the_examples_this_test_runs() -> None:
    commands = readme_commands()
    subcommands = {shlex.split(c)[1 if c.startswith("draflow") else 2] for c in commands}
    assert {"status", "explain", "describe", "events", "trace"} <= subcommands, commands
    # A command this test does not know may not end by itself (``draflow ui`` serves until Ctrl-C):
    # teach problems_of / run_in_shell how to check it before the README shows it here.
    assert subcommands <= ONE_SHOT, f"README example(s) {sorted(subcommands - ONE_SHOT)} not checked here"
    assert any(c.startswith("kubectl draflow ") for c in commands), commands


def test_comments_are_stripped_and_other_blocks_ignored() -> None:
    text = "```bash\nmake up\n```\n\n```bash\nsource .draflow/env.sh\ndraflow status   # a # comment\n" \
           "echo hi\nkubectl draflow status -o json\n```\n"
    assert readme_commands(text) == ["draflow status", "kubectl draflow status -o json"]


def problems_of(command: str, out: str) -> list[str]:
    """What is wrong with the output of one README command (empty: it works)."""
    problems = [f"prints {m!r}" for m in FAILURE_MARKERS if m in out]
    argv = shlex.split(command)
    if "-o" in argv and argv[argv.index("-o") + 1] == "json":
        try:
            json.loads(out)
        except ValueError:
            problems.append("-o json is not JSON")
    if argv[:2] == ["draflow", "trace"]:
        first = out.splitlines()[0] if out else ""
        match = re.match(r"trace [0-9a-f]{32}: \d+ spans, (\d+) services", first)
        if match is None or int(match.group(1)) < 4:
            problems.append(f"the trace has fewer than 4 services: {first!r}")
    if argv[:2] == ["draflow", "events"] and "allocated" not in out:
        problems.append("the claim's history has no allocation")
    if argv[:3] == ["draflow", "describe", "node"] and argv[3] not in out:
        problems.append("the node is not described")
    return problems


async def run_in_shell(env_file: Path, command: str, kubectl_dir: Path) -> tuple[int, str, str]:
    """``source env.sh && command`` in bash, from a PATH without this test's virtualenv (env.sh must
    bring ``draflow``), with kubectl on it as the README asks."""
    venv_bin = str(Path(sys.executable).parent)
    path = ":".join(d for d in os.environ.get("PATH", "/usr/bin:/bin").split(":") if d and d != venv_bin)
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{kubectl_dir}:{path}"}
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", f"source {shlex.quote(str(env_file))} && {command}", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.integration
@pytest.mark.timeout(900)
async def test_the_readme_examples_work_as_printed_against_the_demo() -> None:
    """`make up`'s two steps in an environment of their own (a second allocator on the shared test
    environment would schedule other tests' pods), then every README command until it works (spans
    reach Jaeger in batches: a command may need a second run, as a user would give it)."""
    import argparse
    from contextlib import AsyncExitStack

    from draflow_cli import trace as cli_trace
    from draflow_cli.trace import build_tree, fetch_trace, trace_id_of
    from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
    from draflow_testenv.binaries import ensure_binary
    from draflow_testenv.environment import Environment
    from draflow_testenv.flow import DEMO_NAMESPACE, STEPS
    from draflow_testenv.wait import eventually

    kubectl_dir = (await ensure_binary("kubectl")).parent  # the README: "kubectl on PATH"
    commands = readme_commands()
    args = argparse.Namespace(nodes=2, gpus=8, demo_timeout=240.0)
    async with Environment(nodes=2, secure_nats=True) as env, AsyncExitStack() as stack:
        for _, step in STEPS:
            await stack.enter_async_context(step(env, args))
        results: dict[str, list[str]] = {}
        for command in commands:
            async def works(command: str = command) -> bool:
                code, out, err = await run_in_shell(env.env_file, command, kubectl_dir)
                results[command] = ([f"exit {code}"] if code else []) + problems_of(command, out) + \
                    ([f"writes to stderr: {err[-300:]}"] if err.strip() else []) + \
                    [f"stdout: {out[:800]}", f"stderr: {err[-400:]}"]
                return len(results[command]) == 2
            with contextlib.suppress(AssertionError):  # reported below, with every other failing one
                await eventually(works, 60, f"README example {command!r}", interval=2.0)
        failing = {c: p for c, p in results.items() if len(p) > 2}
        assert not failing, json.dumps(failing, indent=1)

        # Every claim of the demo has one trace, read back with `draflow trace` (the services on its
        # first line, counted from Jaeger): at least four services, except the claims the README names
        # with exactly the services their traces hold.
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        try:
            claims = (await kube.list(RESOURCE_CLAIMS, namespace=DEMO_NAMESPACE))["items"]
            allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
            assert [c["metadata"]["name"] for c in claims if c not in allocated] == ["too-big"]
            exceptions = readme_trace_exceptions()
            expected = {c["metadata"]["name"]: exceptions.get(demo_name(c)) for c in claims}
            assert {n for n, e in expected.items() if e} == {"too-big", extended_claim_name(claims)}
            seen: dict[str, tuple[set[str], list[str]]] = {}  # claim -> (services, roots as "service op")

            def wrong() -> dict[str, Any]:
                return {n: (sorted(services), roots) for n, (services, roots) in seen.items()
                        if trace_wrong(services, roots, expected[n])}

            async def every_claim_traced() -> bool:
                for c in claims:
                    name = c["metadata"]["name"]
                    try:
                        out = await cli_trace.run(kube, env.jaeger_query_url, DEMO_NAMESPACE, name)
                    except LookupError as exc:  # no trace annotation: counted as no services
                        out = str(exc)
                    doc = await fetch_trace(env.jaeger_query_url, trace_id_of(c)) or {}
                    seen[name] = (printed_services(out), [f"{r.service} {r.name}" for r in build_tree(doc)])
                return not wrong()

            with contextlib.suppress(AssertionError):  # the assertion below names the claims
                await eventually(every_claim_traced, 90, "traces of the demo's claims", interval=2.0)
            assert wrong() == {}, seen

            # As the README says: the claim-controller's part in the extended resource claim is its
            # clean-up once the pod ends; then the claim's trace has four services.
            extended = next(c for c in claims if c["metadata"]["name"] == extended_claim_name(claims))
            await kube.delete(PODS, "legacy-gpus", namespace=DEMO_NAMESPACE)

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
        finally:
            await kube.close()


def trace_wrong(services: set[str], roots: list[str], want: set[str] | None) -> bool:
    """A demo claim's trace breaks the README's rule: not one root ("service operation"), or fewer than
    four services, or for a claim the README names (``want``) not exactly those. A user's claim the
    allocator saw first (its root the allocator's ``claim.seen``) has no claim-controller span: one fewer."""
    if len(roots) != 1:
        return True
    fewer = roots[0] == f"structured-allocator {ROOT_SPAN}"
    if want is not None:
        return services != want - ({"claim-controller"} if fewer else set())
    return len(services) < (3 if fewer else 4)


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


def printed_services(out: str) -> set[str]:
    """The services on the first line of `draflow trace` (``trace <id>: N spans, M services (a, b)``)."""
    match = re.match(r"trace [0-9a-f]{32}: \d+ spans, \d+ services \(([^)]*)\)", out)
    return set(match.group(1).split(", ")) if match else set()


def demo_name(claim: dict[str, Any]) -> str:
    """The claim's name, or for the special claim of extended resources its pod's (its own is generated)."""
    meta = claim["metadata"]
    if (meta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true":
        return str(next(r["name"] for r in meta.get("ownerReferences") or () if r.get("kind") == "Pod"))
    return str(meta["name"])


def extended_claim_name(claims: list[dict[str, Any]]) -> str:
    (name,) = [c["metadata"]["name"] for c in claims if demo_name(c) != c["metadata"]["name"]]
    return name


def readme_trace_exceptions(text: str | None = None) -> dict[str, set[str]]:
    """The README's table of demo claims whose traces have fewer than four services: claim (for the
    extended resource claim: its pod) -> the services the trace holds."""
    text = text if text is not None else (repo_root() / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9-]+)`[^|]*\| ([a-z, -]+) \|", text, flags=re.M)
    return {name: {s.strip() for s in services.split(",")} for name, services in rows
            if set(s.strip() for s in services.split(",")) <= SERVICES}


def test_the_readme_names_the_demo_claims_with_fewer_than_four_services_in_their_trace() -> None:
    assert readme_trace_exceptions() == {
        "too-big": {"claim-controller", "structured-allocator"},
        "legacy-gpus": {"structured-allocator", "kubelet-dra-shim", "reference-driver"},
    }
