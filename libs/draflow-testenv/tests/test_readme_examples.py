"""The README's examples work as printed: the commands of its quick start and of its *Try it* section, read
from README.md (so the test follows the README), typed into a plain shell from the repository after
``source .draflow/env.sh`` against a ``make up``-like environment with the demo applied. Every claim of
``make up``'s demo has one trace in Jaeger with spans of at least four services, exactly those the README's
table names; the *Try it* claims (applied by the README's own ``kubectl apply -k deploy/demo/extras``)
hold exactly what its second table says: the claim that fits on no node, and the extended resource claim,
which the claim-controller does not touch before its clean-up."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Callable
from typing import Any

import pytest
from readme_kit import (
    APPLY_EXTRAS,
    DELETE_EXTRAS,
    EXTENDED_CLAIM_ANNOTATION,
    ONE_SHOT,
    demo_name,
    demo_trace_wrong,
    problems_of,
    readme_commands,
    readme_trace_tables,
    row_of,
    run_until_each_works,
    trace_wrong,
    try_it_commands,
)


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

        async def wrong_traces(of: list[dict[str, Any]], rows: dict[str, set[str]],
                               rule: Callable[[set[str], list[str], set[str]], bool],
                               what: str) -> dict[str, Any]:
            """Poll the traces of the claims ``of`` until none breaks ``rule`` against ``rows`` (the
            README's row of each claim) or 90 s are over; -> those that still break it."""
            def wrong() -> dict[str, Any]:
                return {n: (sorted(s), roots) for n, (s, roots) in seen.items() if rule(s, roots, rows[n])}

            async def every_claim_traced() -> bool:
                for c in of:
                    await traced(c)
                return not wrong()

            with contextlib.suppress(AssertionError):  # the caller's assertion names the claims
                await eventually(every_claim_traced, 90, what, interval=2.0)
            return wrong()

        # Every claim of the demo is allocated and has one trace in Jaeger with exactly the services of
        # its README row, four or more.
        demo = await claims()
        assert [c["metadata"]["name"] for c in demo if not (c.get("status") or {}).get("allocation")] == []
        want = {c["metadata"]["name"]: row_of(demo_rows, demo_name(c)) for c in demo}
        demo_wrong = await wrong_traces(demo, want, demo_trace_wrong, "traces of the demo's claims")
        assert demo_wrong == {} and len(seen) == len(demo) == 12, seen

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
        assert await wrong_traces(extras, extra_want, trace_wrong, "traces of the Try it claims") == {}, seen

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
