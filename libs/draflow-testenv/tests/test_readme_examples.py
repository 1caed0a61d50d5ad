"""The README's examples work as printed: the ``draflow ...`` commands of its quick start, read from
README.md (so the test follows the README), typed into a plain shell after ``source .draflow/env.sh``
against a ``make up``-like environment with the demo applied. And every claim of the demo that got devices
has one trace in Jaeger with spans of at least four services (three for the special claim of extended
resources, which the claim-controller does not touch before its clean-up)."""

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

from draflow_testenv.binaries import repo_root

SOURCE_LINE = "source .draflow/env.sh"
ONE_SHOT = {"status", "explain", "describe", "events", "trace"}  # subcommands that answer and exit
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
FAILURE_MARKERS = ("not found", "has no", "Traceback", "no answer", "no spans in Jaeger")


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
    from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
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

        # Every claim of the demo that got devices has one trace with at least four services.
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        try:
            claims = (await kube.list(RESOURCE_CLAIMS, namespace=DEMO_NAMESPACE))["items"]
            # `draflow trace` answers with a span tree for every claim of the demo, too-big included
            # (its trace: the claim-controller's root and the allocator's failed attempts).
            printed = {}
            for c in claims:
                name = c["metadata"]["name"]
                printed[name] = await cli_trace.run(kube, env.jaeger_query_url, DEMO_NAMESPACE, name, wait=30)
        finally:
            await kube.close()
        tree = re.compile(r"trace [0-9a-f]{32}: \d+ spans")
        assert {n: out for n, out in printed.items() if not tree.match(out)} == {}
        allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
        assert len(allocated) >= len(claims) - 1  # all but too-big

        traces: dict[str, tuple[int, int]] = {}  # claim -> (services, roots)

        def wanted(claim: dict[str, Any]) -> int:
            """Four services (root by claim-controller, or allocator for a user's claim it saw first);
            three for the special claim of extended resources: the allocator creates it (its root),
            the claim-controller has no part in it until it is cleaned up."""
            annotations = claim["metadata"].get("annotations") or {}
            return 3 if annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true" else 4

        def untraced() -> dict[str, tuple[int, int]]:
            return {c["metadata"]["name"]: traces[c["metadata"]["name"]] for c in allocated
                    if traces[c["metadata"]["name"]][0] < wanted(c) or traces[c["metadata"]["name"]][1] != 1}

        async def every_claim_traced() -> bool:
            for claim in allocated:
                doc = await fetch_trace(env.jaeger_query_url, trace_id_of(claim)) or {}
                procs = doc.get("processes") or {}
                services = {procs[s["processID"]]["serviceName"] for s in doc.get("spans") or ()}
                traces[claim["metadata"]["name"]] = (len(services), len(build_tree(doc)))
            return not untraced()

        with contextlib.suppress(AssertionError):  # the assertion below names the claims
            await eventually(every_claim_traced, 60, "traces of the demo's claims", interval=2.0)
        assert untraced() == {}
