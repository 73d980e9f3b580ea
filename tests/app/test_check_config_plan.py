"""Which checks `gpufrag check-config` runs for which components, modes and settings, and the
permissions it asks the API server about: plain functions, no I/O."""

from __future__ import annotations

import pytest

from models import GpufragSettings, KubeSettings
from models.action_settings import AlertSettings, GuardrailSettings
from streams.app.checking.check_plan import Component, Mode, Target, plan_checks
from streams.app.checking.run import CHECK_TIMEOUT_S, check_timeout_s, process_age_s
from streams.app.checking.targets import check_guardrails, needed_permissions

ALL = tuple(Component)
ENFORCE = GuardrailSettings(mode="enforce")


def _settings(**groups: object) -> GpufragSettings:
    return GpufragSettings.model_validate(groups)


def test_distributed_components_all_reach_kafka_and_embedded_ones_never() -> None:
    settings = _settings(guardrails=ENFORCE, alerts=AlertSettings(alertmanager_url="http://a:9093"))
    for component in Component:
        distributed = plan_checks(settings, components=(component,), mode=Mode.DISTRIBUTED)
        embedded = plan_checks(settings, components=(component,), mode=Mode.EMBEDDED)
        assert Target.KAFKA in distributed.targets, component
        assert Target.KAFKA not in embedded.targets, component
    every = plan_checks(settings, components=ALL, mode=Mode.DISTRIBUTED)
    assert every.targets == frozenset(Target) and every.skipped == ()


def test_an_embedded_watch_checks_the_store_it_writes() -> None:
    plan = plan_checks(_settings(), components=(Component.WATCH,), mode=Mode.EMBEDDED)
    assert plan.targets == {Target.KUBE_WATCH, Target.STORE, Target.GUARDRAILS}


def test_what_the_settings_leave_unused_is_skipped_and_said() -> None:
    plan = plan_checks(_settings(), components=ALL, mode=Mode.DISTRIBUTED)
    assert Target.KUBE_ACT not in plan.targets  # dry-run: the actuator makes no API client
    assert Target.ALERTMANAGER not in plan.targets  # no URL
    assert len(plan.skipped) == 2
    assert "dry-run" in plan.skipped[0] and "ALERTMANAGER_URL" in plan.skipped[1]


def test_permissions_follow_the_watched_resources_namespace_and_the_actuator() -> None:
    kube = KubeSettings(namespace="ml", resources=("pods", "nodes", "kueue-workloads"))
    settings = _settings(kube=kube, guardrails=ENFORCE)
    plan = plan_checks(
        settings, components=(Component.WATCH, Component.ACTUATE), mode=Mode.EMBEDDED
    )
    needs = {p.describe(): who for p, who in needed_permissions(settings, plan).items()}
    assert needs == {
        "list pods in namespace ml": ["watch"],
        "watch pods in namespace ml": ["watch"],
        "list nodes": ["watch"],
        "watch nodes": ["watch"],
        "list workloads.kueue.x-k8s.io in namespace ml": ["watch"],
        "watch workloads.kueue.x-k8s.io in namespace ml": ["watch"],
        "get pods in all namespaces": ["actuate"],
        "create pods/eviction in all namespaces": ["actuate"],
        "get nodes": ["actuate"],
        "patch nodes": ["actuate"],
        "get leases.coordination.k8s.io in namespace gpufrag": ["actuate"],
        "create leases.coordination.k8s.io in namespace gpufrag": ["actuate"],
        "update leases.coordination.k8s.io in namespace gpufrag": ["actuate"],
    }


def test_enforce_needs_protected_namespaces() -> None:
    bare = GuardrailSettings(mode="enforce", protected_namespaces=())
    assert len(check_guardrails(_settings(guardrails=bare))) == 1
    assert check_guardrails(_settings(guardrails=ENFORCE)) == []
    dry = GuardrailSettings(mode="dry-run", protected_namespaces=())
    assert check_guardrails(_settings(guardrails=dry)) == []


def test_a_slow_start_shortens_the_checks_so_the_command_keeps_its_bound() -> None:
    assert check_timeout_s(process_age_s=0.5) == CHECK_TIMEOUT_S
    # 15 s bound - 2 s kept for the exit - 10 s already gone
    assert check_timeout_s(process_age_s=10.0) == pytest.approx(3.0)
    assert check_timeout_s(process_age_s=60.0) == 1.5  # every check still gets a try


def test_this_process_knows_its_age() -> None:
    age = process_age_s()
    assert 0.0 < age < 24 * 3600  # pytest started it some seconds ago
