"""The Prometheus alert rules (deploy/helm/gpufrag/files/prometheus-rules.yaml): promtool
accepts them, their unit tests pass, each alert has a case that fires and one that does not
(proved by breaking every rule both ways), each carries a severity and a runbook that
exists, and they read only metrics gpufrag exports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.metric_names import EXPORTED, defined_in_source, metric_names
from tests.deploy.promtool import promtool
from tests.deploy.rule_files import (
    RULE_TESTS,
    RULES,
    RUNBOOK_BASE,
    RUNBOOKS,
    alert_rules,
    load_yaml,
)

pytestmark = pytest.mark.deploy

SEVERITIES = {"info", "warning", "critical"}
# promtool's report of one failed expectation: the alert, then what the test expected.
FAILED_CASE = re.compile(r"alertname: (\w+), time: [^\n]*\n\s*exp:\[(\]?)")


def _alerts() -> list[str]:
    return [rule["alert"] for rule in alert_rules(load_yaml(RULES))]


def test_promtool_accepts_the_rule_file() -> None:
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


def test_the_rule_unit_tests_pass() -> None:
    result = promtool("test", "rules", RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _run_tests_against(tmp_path: Path, expr: str) -> dict[str, set[str]]:
    """The rule tests run against a copy of the rules whose every expression is `expr`:
    for each alert, which kinds of its cases failed ('fires' expected an alert, 'quiet' none)."""
    rules = load_yaml(RULES)
    for rule in alert_rules(rules):
        rule["expr"] = expr
    broken = tmp_path / "rules.yaml"
    broken.write_text(yaml.safe_dump(rules), encoding="utf-8")
    tests = load_yaml(RULE_TESTS)
    tests["rule_files"] = [str(broken)]
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(yaml.safe_dump(tests), encoding="utf-8")
    result = promtool("test", "rules", test_file)
    assert result.returncode != 0, "broken rules passed the tests:\n" + result.stdout
    failed: dict[str, set[str]] = {}
    for alert, empty in FAILED_CASE.findall(result.stdout + result.stderr):
        failed.setdefault(alert, set()).add("quiet" if empty else "fires")
    return failed


def test_every_alert_has_a_case_that_fires(tmp_path: Path) -> None:
    failed = _run_tests_against(tmp_path, "vector(1) > 2")  # never fires
    missing = [a for a in _alerts() if "fires" not in failed.get(a, set())]
    assert not missing, f"no case expects these alerts to fire: {missing}"


def test_every_alert_has_a_case_that_does_not_fire(tmp_path: Path) -> None:
    failed = _run_tests_against(tmp_path, "vector(1)")  # always fires at once
    missing = [a for a in _alerts() if "quiet" not in failed.get(a, set())]
    assert not missing, f"no case expects these alerts to stay quiet: {missing}"


def test_every_rule_waits_has_a_severity_and_a_runbook_that_exists() -> None:
    rules = alert_rules(load_yaml(RULES))
    assert len(rules) >= 9
    index = (RUNBOOKS / "README.md").read_text(encoding="utf-8")
    for rule in rules:
        alert = rule["alert"]
        assert re.fullmatch(r"Gpufrag[A-Z][A-Za-z]+", alert), alert
        assert "for" in rule, f"{alert}: no `for:`"
        assert rule["labels"]["severity"] in SEVERITIES, alert
        notes = rule["annotations"]
        assert notes["summary"].strip() and notes["description"].strip(), alert
        assert notes["runbook_url"] == f"{RUNBOOK_BASE}/{alert}.md", alert
        runbook = RUNBOOKS / f"{alert}.md"
        assert runbook.is_file(), f"{alert}: {runbook} is missing"
        assert runbook.read_text(encoding="utf-8").startswith(f"# {alert}\n"), runbook
        assert f"]({alert}.md)" in index, f"{alert}: not in deploy/runbooks/README.md"
    listed = {p.stem for p in RUNBOOKS.glob("*.md")} - {"README"}
    assert listed == {rule["alert"] for rule in rules}, "a runbook for no rule, or the reverse"


def test_the_runbooks_links_point_to_files_and_headings() -> None:
    links = 0
    for page in sorted(RUNBOOKS.glob("*.md")):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve()
            assert file.is_file(), f"{page.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
                slugs = {re.sub(r"[^a-z0-9_ -]", "", h.lower()).replace(" ", "-") for h in headings}
                assert anchor in slugs, f"{page.name}: {target}: no such heading"
            links += 1
    assert links >= 20


def test_the_rules_read_only_metrics_gpufrag_exports() -> None:
    names = {n for rule in alert_rules(load_yaml(RULES)) for n in metric_names(rule["expr"])}
    assert len(names) >= 10
    assert names <= EXPORTED, f"not exported by gpufrag: {sorted(names - EXPORTED)}"
    missing = sorted(n for n in names if not defined_in_source(n))
    assert not missing, f"not defined in models/, connectors/ or streams/: {missing}"


def test_metric_names_sees_through_labels_functions_and_keywords() -> None:
    expr = (
        'sum without (reason) (rate(gpufrag_a_total{x="gpufrag_not_me"}[5m])) > 0\n'
        "and on (job) time() - gpufrag_b offset 15m unless gpufrag_c == 1"
    )
    assert metric_names(expr) == {"gpufrag_a_total", "gpufrag_b", "gpufrag_c"}
