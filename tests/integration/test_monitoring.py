"""deploy/kustomize/components/monitoring: the alert rules pass ``promtool check rules`` and their unit
tests (``promtool test rules``, a firing and a quiet case per alert); the dashboard loads into Grafana's
dashboard model (grafana-foundation-sdk, Grafana 11.6 types) without a field dropped or mistyped, every
PromQL expression in it passes promtool's parser; the production overlay ships both files unchanged.

That the dashboard and the rules name only metrics draflow exports is checked against real scrapes in
test_metrics_flow.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as grafana_dashboard
from grafana_foundation_sdk.models import prometheus as grafana_prometheus
from monitoring_kit import (
    DASHBOARD,
    RULES,
    RULES_TESTS,
    dashboard,
    dashboard_expressions,
    metric_names,
    rules,
)

from draflow_testenv.binaries import ensure_binary


async def promtool(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(await ensure_binary("promtool")), *args, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


# ------------------------------------------------------------------------------------------------ rules

@pytest.mark.integration
async def test_promtool_check_rules_accepts_the_alert_rules() -> None:
    code, out = await promtool("check", "rules", str(RULES))
    assert code == 0, out
    assert f"SUCCESS: {len(rules())} rules found" in out


@pytest.mark.integration
async def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    code, out = await promtool("test", "rules", RULES_TESTS.name, cwd=RULES_TESTS.parent)
    assert code == 0, out
    assert "SUCCESS" in out


@pytest.mark.integration
async def test_promtool_test_rules_fails_when_an_alert_does_not_fire_as_expected(tmp_path: Path) -> None:
    """The unit tests can fail: the same cases against rules with a longer ``for`` do."""
    doc = yaml.safe_load(RULES.read_text())
    for rule in doc["groups"][0]["rules"]:
        rule["for"] = "30m"
    (tmp_path / RULES.name).write_text(yaml.safe_dump(doc))
    (tmp_path / RULES_TESTS.name).write_text(RULES_TESTS.read_text())
    code, out = await promtool("test", "rules", RULES_TESTS.name, cwd=tmp_path)
    assert code != 0
    assert "FAILED" in out


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    cases = [case for test in yaml.safe_load(RULES_TESTS.read_text())["tests"]
             for case in test["alert_rule_test"]]
    for rule in rules():
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']}: no case where it fires"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']}: no case where it stays quiet"


# -------------------------------------------------------------------------------------------- dashboard

def _dropped(mine: Any, model: Any, path: str = "") -> list[str]:
    """Where the model's JSON lost or changed something of ours (a field the schema does not have)."""
    if isinstance(mine, dict):
        if not isinstance(model, dict):
            return [f"{path}: became {type(model).__name__}"]
        return [p for k, v in mine.items()
                for p in ([f"{path}/{k}: not in the model"] if k not in model
                          else _dropped(v, model[k], f"{path}/{k}"))]
    if isinstance(mine, list):
        if not isinstance(model, list) or len(model) != len(mine):
            return [f"{path}: list changed"]
        pairs = enumerate(zip(mine, model, strict=True))
        return [p for i, (a, b) in pairs for p in _dropped(a, b, f"{path}[{i}]")]
    return [] if mine == model else [f"{path}: {mine!r} became {model!r}"]


def load_in_grafana_model(doc: dict[str, Any]) -> list[str]:
    """Parse ``doc`` with Grafana's dashboard model and encode it again: what did not survive."""
    plugins.register_default_plugins()
    model = grafana_dashboard.Dashboard.from_json(doc)
    problems = _dropped(doc, json.loads(json.dumps(model, cls=JSONEncoder)))
    for panel in model.panels or []:
        if not isinstance(panel, grafana_dashboard.Panel) or panel.type_val == "row":
            continue
        for target in panel.targets or []:
            if not isinstance(target, grafana_prometheus.Dataquery):
                problems.append(f"panel {panel.title}: a target is not a Prometheus query")
    return problems


def test_the_dashboard_loads_into_grafanas_dashboard_model() -> None:
    doc = dashboard()
    assert load_in_grafana_model(doc) == []
    assert doc["uid"] and doc["title"]
    assert len([p for p in doc["panels"] if p["type"] != "row"]) >= 10


def test_the_model_check_catches_a_field_grafana_does_not_know() -> None:
    doc = dashboard()
    doc["panels"][1]["gridpos"] = doc["panels"][1].pop("gridPos")
    assert any("gridpos: not in the model" in p for p in load_in_grafana_model(doc))


def test_every_dashboard_query_names_a_metric() -> None:
    for where, expr in dashboard_expressions(dashboard()):
        assert metric_names(expr), f"{where}: {expr}"


@pytest.mark.integration
async def test_promtool_parses_every_dashboard_expression(tmp_path: Path) -> None:
    exprs = dashboard_expressions(dashboard())
    doc = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": expr} for i, (_, expr) in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-exprs.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out = await promtool("check", "rules", str(path))
    assert code == 0, out
    assert f"SUCCESS: {len(exprs)} rules found" in out


# ----------------------------------------------------------------------------------------------- deploy

@pytest.mark.integration
async def test_the_production_overlay_ships_the_dashboard_and_the_rules_unchanged(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    maps = {o["metadata"]["name"]: o for o in built["production"] if o["kind"] == "ConfigMap"}
    board, alerts = maps["draflow-grafana-dashboard"], maps["draflow-prometheus-rules"]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["metadata"]["namespace"] == alerts["metadata"]["namespace"] == "draflow-system"
    assert board["data"] == {DASHBOARD.name: DASHBOARD.read_text()}
    assert alerts["data"] == {RULES.name: RULES.read_text()}
