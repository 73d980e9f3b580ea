"""Where the alert rules, their promtool unit tests and their runbooks are, and how to read
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.paths import REPO_ROOT

__all__ = ["RULES", "RULE_TESTS", "RUNBOOKS", "RUNBOOK_BASE", "alert_rules", "load_yaml"]

RULES = REPO_ROOT / "deploy" / "helm" / "gpufrag" / "files" / "prometheus-rules.yaml"
RULE_TESTS = Path(__file__).resolve().parent / "rules" / "prometheus-rules.test.yaml"
RUNBOOKS = REPO_ROOT / "deploy" / "runbooks"
RUNBOOK_BASE = "https://github.com/gpufrag/gpufrag/blob/main/deploy/runbooks"
"""The literal base of every rule's runbook_url (the chart may leave it as is)."""


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def alert_rules(document: Any) -> list[dict[str, Any]]:
    """Every alerting rule of a rule file, in order."""
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]
