"""Allocation node selectors, evaluated like nodeaffinity.NodeSelector."""

import pytest

from claim_controller.nodeselector import node_selector_admits, selector_needs_labels


def term(*, exprs: list | None = None, fields: list | None = None) -> dict:
    out: dict = {}
    if exprs:
        out["matchExpressions"] = exprs
    if fields:
        out["matchFields"] = fields
    return out


def sel(*terms: dict) -> dict:
    return {"nodeSelectorTerms": list(terms)}


NAME_IN_N1 = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
ZONE_A = {"key": "zone", "operator": "In", "values": ["a"]}


@pytest.mark.parametrize(
    ("selector", "node", "labels", "admits"),
    [
        pytest.param(None, "n1", None, True, id="no-selector-admits-all"),
        pytest.param(sel(term(fields=[NAME_IN_N1])), "n1", None, True, id="name-match"),
        pytest.param(sel(term(fields=[NAME_IN_N1])), "n2", None, False, id="name-mismatch"),
        pytest.param(sel(term(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}])),
                     "n2", None, True, id="name-not-in"),
        pytest.param(sel(term()), "n1", {}, False, id="empty-term-matches-nothing"),
        pytest.param(sel(term(exprs=[ZONE_A])), "n1", {"zone": "a"}, True, id="label-in"),
        pytest.param(sel(term(exprs=[ZONE_A])), "n1", {"zone": "b"}, False, id="label-not-matching"),
        pytest.param(sel(term(exprs=[ZONE_A], fields=[NAME_IN_N1])), "n1", {"zone": "b"}, False,
                     id="term-is-anded"),
        pytest.param(sel(term(exprs=[ZONE_A]), term(fields=[NAME_IN_N1])), "n1", {"zone": "b"}, True,
                     id="terms-are-ored"),
        pytest.param(sel(term(exprs=[{"key": "zone", "operator": "Exists"}])), "n1", {"zone": "x"}, True,
                     id="exists"),
        pytest.param(sel(term(exprs=[{"key": "zone", "operator": "DoesNotExist"}])), "n1", {}, True,
                     id="does-not-exist"),
        pytest.param(sel(term(exprs=[{"key": "gpus", "operator": "Gt", "values": ["3"]}])), "n1",
                     {"gpus": "4"}, True, id="gt"),
        pytest.param(sel(term(exprs=[{"key": "gpus", "operator": "Lt", "values": ["3"]}])), "n1",
                     {"gpus": "x"}, False, id="lt-not-an-int"),
    ],
)
def test_node_selector_admits(selector: dict | None, node: str, labels: dict | None, admits: bool) -> None:
    assert node_selector_admits(selector, node, labels) is admits


def test_selector_needs_labels_only_for_expressions() -> None:
    assert not selector_needs_labels(sel(term(fields=[NAME_IN_N1])))
    assert selector_needs_labels(sel(term(fields=[NAME_IN_N1]), term(exprs=[ZONE_A])))
    assert not selector_needs_labels(None)
