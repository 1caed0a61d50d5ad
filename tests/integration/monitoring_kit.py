"""What the monitoring tests share: the component's files, the dashboard's PromQL expressions and the
metric names an expression or a /metrics scrape holds."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "kustomize" / "components" / "monitoring"
DASHBOARD = MONITORING / "draflow-dashboard.json"
RULES = MONITORING / "draflow-alerts.rules.yaml"
RULES_TESTS = MONITORING / "draflow-alerts_test.yaml"
# Grafana's variables, as a query would see them (an interval for the range, any value for a regex).
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels") or [])


def dashboard_expressions(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title / target refId, PromQL with Grafana's variables replaced) of every Prometheus query of
    the dashboard, template variable queries included."""
    out = []
    for p in _panels(doc.get("panels") or []):
        for t in p.get("targets") or []:
            out.append((f"{p['title']}/{t['refId']}", _expand(t["expr"])))
    for var in (doc.get("templating") or {}).get("list") or []:
        query = var.get("query")
        if var.get("type") == "query" and isinstance(query, dict):
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", query["query"])
            assert m, f"variable {var['name']}: unexpected query {query['query']}"
            out.append((f"variable {var['name']}", m.group(1)))
    return out


def _expand(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    # any other variable only appears inside a regex matcher's string
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (a PromQL parser's syntax tree, not a regex)."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if type(node).__name__ == "VectorSelector":
            names.add(node.name)
        for attr in ("expr", "lhs", "rhs", "args", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if isinstance(child, list):
                for c in child:
                    walk(c)
            elif child is not None and not isinstance(child, str | int | float):
                walk(child)

    walk(promql_parser.parse(expr))
    return names


def scraped_names(text: str) -> set[str]:
    """The name of every sample of a Prometheus text exposition (histograms' _bucket/_sum/_count; a
    family without samples does not count)."""
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample called ``name``."""
    return [(dict(s.labels), s.value) for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name]
