"""The Helm chart as the tests use it: the real helm binary (built by deploy/local/helm.sh), the
five value sets, and what `helm template` renders from each."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.paths import REPO_ROOT

CHART = REPO_ROOT / "deploy" / "helm" / "gpufrag"
VALUES_DIR = Path(__file__).resolve().parent / "values"
VALUE_SETS = (
    "embedded",
    "distributed",
    "actuator-enforce",
    "watch-only",
    "kafka-secure",
    "extender",
)
CRDS_DIR = REPO_ROOT / "deploy" / "helm" / "crds-for-tests"
WORKLOAD_KINDS = ("Deployment", "DaemonSet")
HELM_TIMEOUT_S = 120.0
"""`helm template` of this chart takes well under a second; 120 s is for a busy 2-core CI."""


def build_helm() -> Path:
    """deploy/local/helm.sh's cached binary (built from the Go module proxy on a cold cache,
    which takes minutes)."""
    script = REPO_ROOT / "deploy" / "local" / "helm.sh"
    out = subprocess.run(
        ["bash", str(script), "build"], capture_output=True, text=True, timeout=3600
    )
    assert out.returncode == 0, f"helm.sh build failed:\n{out.stderr}"
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True, slots=True)
class Helm:
    """The helm binary, with its own config, cache and data directories (nothing read from or
    written to the user's)."""

    binary: Path
    home: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        return subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=HELM_TIMEOUT_S,
        )

    def template(
        self, value_set: str | None, *, release: str, namespace: str, extra: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        values = ("-f", str(VALUES_DIR / f"{value_set}.yaml")) if value_set else ()
        return self.run("template", release, str(CHART), "-n", namespace, *values, *extra)

    def render(self, value_set: str, *, release: str, namespace: str) -> list[dict[str, Any]]:
        """Every object `helm template` renders, in order; fails the test on a non-zero exit."""
        out = self.template(value_set, release=release, namespace=namespace)
        assert out.returncode == 0, f"helm template {value_set} failed:\n{out.stderr}"
        return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def containers(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """("Kind/name", container) for every container and init container of every workload."""
    for obj in objects:
        if obj["kind"] not in WORKLOAD_KINDS:
            continue
        spec = obj["spec"]["template"]["spec"]
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            yield f"{obj['kind']}/{obj['metadata']['name']}", c


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objects:
        if obj["kind"] in WORKLOAD_KINDS:
            yield f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]


def of_kind(objects: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in kinds]


def crds() -> list[dict[str, Any]]:
    """The ServiceMonitor and PrometheusRule CRDs copied from prometheus-operator (see the
    README beside them)."""
    docs = []
    for path in sorted(CRDS_DIR.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs
