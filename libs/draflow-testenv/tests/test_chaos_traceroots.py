"""The chaos run's Jaeger check: at most one successful ``claim.seen`` root per claim, the one the claim's
annotation names; each rule names a hand-made violation."""

from __future__ import annotations

from typing import Any

from draflow_testenv.chaos.traceroots import RootSpan, root_spans, trace_root_violations

NS = "draflow-chaos"
T1, T2 = "a" * 32, "b" * 32


def _claim(name: str, trace_id: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "annotations": {"draflow.dev/traceparent": f"00-{trace_id}-{'1' * 16}-01"}}}


def _root(service: str, trace_id: str, name: str = "c1", error: bool = False) -> RootSpan:
    return RootSpan(service, trace_id, f"{NS}/{name}", f"uid-{name}", error)


def test_jaegers_search_answer_yields_the_services_own_claim_seen_spans() -> None:
    def span(op: str, process: str, trace_id: str, **tags: Any) -> dict[str, Any]:
        return {"traceID": trace_id.upper(), "operationName": op, "processID": process,
                "tags": [{"key": k, "value": v} for k, v in tags.items()]}

    claim_tags = {"k8s.namespace.name": NS, "k8s.resourceclaim.name": "c1", "k8s.resourceclaim.uid": "uid-c1"}
    processes = {"p1": {"serviceName": "claim-controller"}, "p2": {"serviceName": "kubelet-dra-shim"}}
    traces = [{"processes": processes,
               "spans": [span("claim.seen", "p1", T1, **claim_tags), span("prepare", "p2", T1),
                         span("claim.seen", "p1", T2, **claim_tags, error=True)]}]
    assert root_spans("claim-controller", traces) == [_root("claim-controller", T1),
                                                      _root("claim-controller", T2, error=True)]
    assert root_spans("structured-allocator", traces) == []


def test_one_root_named_by_the_annotation_holds() -> None:
    claims = [_claim("c1", T1), _claim("c2", T2)]
    roots = [_root("structured-allocator", T1), _root("claim-controller", T2, error=True)]
    assert trace_root_violations(claims, roots) == []
    assert trace_root_violations(claims, []) == []  # a SIGKILLed service may lose unexported spans


def test_two_roots_for_one_claim_are_a_violation() -> None:
    roots = [_root("structured-allocator", T1), _root("claim-controller", T2)]
    assert trace_root_violations([], roots) == [
        f"claim {NS}/c1 (uid uid-c1): 2 trace roots [('{T1}', 'structured-allocator'), "
        f"('{T2}', 'claim-controller')]"]


def test_a_root_other_than_the_annotations_trace_is_a_violation() -> None:
    assert trace_root_violations([_claim("c1", T1)], [_root("claim-controller", T2)]) == [
        f"claim {NS}/c1: annotation names trace {T1}, its claim.seen root is in ['{T2}']"]
