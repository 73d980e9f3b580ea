"""The Helm chart rendered by the real helm: lint, hardening of every container, least-privilege
RBAC, values the schema refuses, and commands and settings gpufrag itself accepts."""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models.settings import GpufragSettings
from streams.app.cli import app_for
from tests.deploy.chart import (
    CHART,
    VALUE_SETS,
    VALUES_DIR,
    Helm,
    containers,
    of_kind,
    pod_specs,
)

pytestmark = pytest.mark.deploy

NS = "gpufrag-system"


def render(helm: Helm, value_set: str) -> list[dict[str, Any]]:
    return helm.render(value_set, release="rel", namespace=NS)


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_lint_is_clean_for_each_value_set(helm: Helm, value_set: str) -> None:
    out = helm.run("lint", "--strict", str(CHART), "-f", str(VALUES_DIR / f"{value_set}.yaml"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_container_is_hardened_and_probed(helm: Helm, value_set: str) -> None:
    objects = render(helm, value_set)
    seen = list(containers(objects))
    assert seen, "no workload rendered"
    for where, c in seen:
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True, where
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc["capabilities"]["drop"] == ["ALL"], where
        assert sc["seccompProfile"]["type"] == "RuntimeDefault", where
        for bound in ("requests", "limits"):
            assert set(c["resources"][bound]) >= {"cpu", "memory"}, (where, bound)
        assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}, where
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}, where
        port = c["args"][c["args"].index("--metrics-port") + 1]
        # the metrics port first; the extender also serves kube-scheduler's calls
        assert c["ports"][0] == {"name": "metrics", "containerPort": int(port), "protocol": "TCP"}
        assert [p["name"] for p in c["ports"][1:]] in ([], ["extender"]), where
        mounts = {m["mountPath"] for m in c["volumeMounts"]}
        assert "/tmp" in mounts, where  # a read-only root needs a writable /tmp
    for where, spec in pod_specs(objects):
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["securityContext"]["runAsUser"] > 0, where


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_rbac_has_no_wildcard_no_secrets_no_pod_delete(helm: Helm, value_set: str) -> None:
    roles = of_kind(render(helm, value_set), "Role", "ClusterRole")
    assert roles, "every value set runs a watcher, which needs a role"
    for role in roles:
        for rule in role["rules"]:
            words = [*rule.get("apiGroups", []), *rule["resources"], *rule["verbs"]]
            words += rule.get("resourceNames", [])
            assert not any("*" in w for w in words), (role["metadata"]["name"], rule)
            assert "secrets" not in rule["resources"], role["metadata"]["name"]
            assert "delete" not in rule["verbs"] and "deletecollection" not in rule["verbs"]
            assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"]
            if "create" in rule["verbs"]:  # create cannot be restricted by name
                assert "resourceNames" not in rule, rule
    # Components that never call the API server mount no token.
    for where, spec in pod_specs(render(helm, value_set)):
        calls_api = any(part in where for part in ("-embedded", "-watch", "-extender")) or (
            "-actuate" in where and value_set == "actuator-enforce"
        )
        assert spec["automountServiceAccountToken"] is calls_api, where


def test_the_extender_binds_pods_and_takes_the_schedulers_calls_only(helm: Helm) -> None:
    objects = render(helm, "extender")
    (role,) = [
        o
        for o in of_kind(objects, "ClusterRole")
        if o["metadata"]["name"].endswith("-extender-bind")
    ]
    writes = [r for r in role["rules"] if set(r["verbs"]) - {"get", "list", "watch"}]
    assert sorted((tuple(r["resources"]), tuple(r["verbs"])) for r in writes) == [
        (("pods",), ("patch",)),
        (("pods/binding",), ("create",)),
    ]
    (deploy,) = [
        o for o in of_kind(objects, "Deployment") if o["metadata"]["name"].endswith("-extender")
    ]
    assert deploy["spec"]["replicas"] == 1  # one assume cache: two would hand out one card twice
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["args"][:5] == ["extender", "--policy", "fgd", "--port", "8099"]
    assert {"name": "extender", "containerPort": 8099, "protocol": "TCP"} in container["ports"]
    (svc,) = [
        o for o in of_kind(objects, "Service") if o["metadata"]["name"].endswith("-extender-http")
    ]
    assert svc["spec"]["ports"][0]["targetPort"] == "extender"
    (policy,) = [
        o for o in of_kind(objects, "NetworkPolicy") if o["metadata"]["name"].endswith("-extender")
    ]
    calls = [i for i in policy["spec"]["ingress"] if i["ports"][0]["port"] == 8099]
    assert calls == [
        {
            "ports": [{"port": 8099, "protocol": "TCP"}],
            "from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
        }
    ]


def test_actuator_rights_only_when_enforcing(helm: Helm) -> None:
    for value_set in ("embedded", "distributed"):
        names = [o["metadata"]["name"] for o in of_kind(render(helm, value_set), "ClusterRole")]
        assert not [n for n in names if n.endswith("-act")], (value_set, names)
    objects = render(helm, "actuator-enforce")
    (act,) = [o for o in of_kind(objects, "ClusterRole") if o["metadata"]["name"].endswith("-act")]
    assert {k: v for k, v in act["rules"][0].items() if k != "apiGroups"} == {
        "resources": ["pods/eviction"],
        "verbs": ["create"],
    }
    (lease,) = of_kind(objects, "Role")
    assert lease["metadata"]["namespace"] == NS
    by_verbs = {tuple(r["verbs"]): r for r in lease["rules"]}
    assert by_verbs[("get", "update")]["resourceNames"] == ["gpufrag-actuator"]
    assert "resourceNames" not in by_verbs[("create",)]
    (deploy,) = [o for o in of_kind(objects, "Deployment") if "actuate" in o["metadata"]["name"]]
    assert deploy["spec"]["replicas"] == 2
    assert [o["metadata"]["name"] for o in of_kind(objects, "PodDisruptionBudget")] == [
        "rel-gpufrag-actuate",
        "rel-gpufrag-worker",
    ]


def test_embedded_is_one_deployment_on_its_chdb_claim(helm: Helm) -> None:
    objects = render(helm, "embedded")
    (deploy,) = of_kind(objects, "Deployment")
    (c,) = deploy["spec"]["template"]["spec"]["containers"]
    assert c["args"][:4] == ["watch", "--bus", "embedded", "--kube"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["GPUFRAG_STORE__DSN"] == "chdb:///data/store"
    assert env["GPUFRAG_GUARDRAILS__MODE"] == "dry-run"
    assert {"name": "store", "mountPath": "/data"} in c["volumeMounts"]
    (claim,) = of_kind(objects, "PersistentVolumeClaim")
    volumes = deploy["spec"]["template"]["spec"]["volumes"]
    assert {"name": "store", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}} in (
        volumes
    )
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}  # one writer on the claim
    assert not of_kind(objects, "PodDisruptionBudget")


def test_distributed_workers_share_one_group_and_secrets_come_from_secrets(helm: Helm) -> None:
    objects = render(helm, "distributed")
    deployments = {o["metadata"]["name"]: o for o in of_kind(objects, "Deployment")}
    assert set(deployments) == {
        f"rel-gpufrag-{c}" for c in ("watch", "worker", "sink", "alert")
    } | {"rel-gpufrag-actuate"}
    worker = deployments["rel-gpufrag-worker"]
    assert worker["spec"]["replicas"] == 3
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--app-id") + 1] == "gpufrag"
    sink = deployments["rel-gpufrag-sink"]["spec"]["template"]["spec"]["containers"][0]
    (dsn,) = [e for e in sink["env"] if e["name"] == "GPUFRAG_STORE__DSN"]
    assert dsn["valueFrom"]["secretKeyRef"] == {"name": "gpufrag-clickhouse", "key": "dsn"}
    alert = deployments["rel-gpufrag-alert"]["spec"]["template"]["spec"]["containers"][0]
    slack = [e for e in alert["env"] if e["name"] == "GPUFRAG_ALERTS__SLACK_WEBHOOK_URL"]
    assert slack[0]["valueFrom"]["secretKeyRef"]["name"] == "gpufrag-alerts"
    assert not of_kind(objects, "PersistentVolumeClaim")  # the store is the ClickHouse server
    (ds,) = of_kind(objects, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert "--nvml" in pod["containers"][0]["args"]


KAFKA_COMPONENTS = ("watch", "worker", "sink", "alert", "actuate", "nvml")


def test_kafka_tls_and_sasl_reach_every_kafka_component_from_secrets(helm: Helm) -> None:
    out = helm.template("kafka-secure", release="rel", namespace=NS)
    assert out.returncode == 0, out.stderr
    objects = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    assert not of_kind(objects, "Secret")  # the chart makes no Secret: it reads existing ones
    seen = []
    for where, pod in pod_specs(objects):
        (c,) = pod["containers"]
        seen.append(where.rsplit("-", 1)[1])
        env = {e["name"]: e for e in c["env"]}
        assert env["GPUFRAG_KAFKA__SECURITY_PROTOCOL"]["value"] == "SASL_SSL", where
        assert env["GPUFRAG_KAFKA__SASL_MECHANISM"]["value"] == "SCRAM-SHA-512", where
        for name, key in (("USERNAME", "user"), ("PASSWORD", "password")):
            var = env[f"GPUFRAG_KAFKA__SASL_{name}"]
            assert var == {
                "name": f"GPUFRAG_KAFKA__SASL_{name}",
                "valueFrom": {"secretKeyRef": {"name": "gpufrag-kafka-user", "key": key}},
            }, where
        # each TLS file is a file of a read-only mount of its Secret's volume
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        files = {
            "TLS_CA_FILE": ("kafka-cluster-ca", "ca.crt"),
            "TLS_CERT_FILE": ("gpufrag-kafka-user", "user.crt"),
            "TLS_KEY_FILE": ("gpufrag-kafka-user", "user.key"),
        }
        for setting, (secret, key) in files.items():
            path = env[f"GPUFRAG_KAFKA__{setting}"]["value"]
            directory, file = path.rsplit("/", 1)
            mount = mounts[directory]
            assert mount["readOnly"] is True, (where, mount)
            source = volumes[mount["name"]]["secret"]
            assert source["secretName"] == secret, (where, source)
            assert {"key": key, "path": file} in source["items"], (where, source)
            assert source["defaultMode"] == 0o440, (where, source)
    assert sorted(seen) == sorted(KAFKA_COMPONENTS)
    # the rendered text names the Secrets, never a value read from them
    secret_vars = [e for _, c in containers(objects) for e in c["env"] if "PASSWORD" in e["name"]]
    assert secret_vars and all("value" not in e for e in secret_vars)


def test_without_tls_or_sasl_the_kafka_components_speak_plaintext(helm: Helm) -> None:
    for where, c in containers(render(helm, "distributed")):
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["GPUFRAG_KAFKA__SECURITY_PROTOCOL"] == "PLAINTEXT", where
        assert not [n for n in env if n.startswith(("GPUFRAG_KAFKA__SASL", "GPUFRAG_KAFKA__TLS"))]
        assert not [m for m in c["volumeMounts"] if m["name"].startswith("kafka-")], where


def test_monitoring_objects_embed_the_rule_file_and_dashboards(helm: Helm) -> None:
    objects = render(helm, "distributed")
    (rule,) = of_kind(objects, "PrometheusRule")
    rule_file = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    assert rule["spec"] == rule_file
    (monitor,) = of_kind(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    services = of_kind(objects, "Service")
    wanted = monitor["spec"]["selector"]["matchLabels"]
    assert len(services) == 6
    assert all(wanted.items() <= s["metadata"]["labels"].items() for s in services)
    boards = [c for c in of_kind(objects, "ConfigMap") if "dashboard" in c["metadata"]["name"]]
    files = sorted(p.name for p in (CHART / "files" / "dashboards").glob("*.json"))
    assert sorted(k for b in boards for k in b["data"]) == files
    assert all(b["metadata"]["labels"]["grafana_dashboard"] == "1" for b in boards)


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        (("mode=bogus",), "mode"),
        (("guardrails.mode=bogus",), "guardrails.mode"),
        (("worker.replicas=0",), "worker.replicas"),
        (("metricsPort=70000",), "metricsPort"),
        (("mode=distributed",), "kafka.bootstrap"),
        (("nvml.enabled=true",), "nvml.enabled"),
        (("guardrails.maxEvictionsNode=-1",), "guardrails.maxEvictionsNode"),
        (("sink.replicas=2",), "sink.replicas"),
        (("kafka.sasl.mechanism=GSSAPI",), "kafka.sasl.mechanism"),
        (
            ("mode=distributed", "kafka.bootstrap=k:9093", "kafka.sasl.enabled=true"),
            "kafka.sasl.existingSecret",
        ),
        (("kafka.tls.caSecret.name=kafka-ca",), "kafka.tls.caSecret.name"),  # TLS is off
        (("kafka.tls.clientSecret.name=user",), "kafka.tls.clientSecret.name"),
        # no value takes a password: it can only come from the Secret
        (("kafka.sasl.password=hunter2",), "kafka.sasl"),
    ],
)
def test_a_bad_value_fails_naming_it(helm: Helm, sets: tuple[str, ...], named: str) -> None:
    flags = tuple(f for s in sets for f in ("--set", s))
    out = helm.template(None, release="rel", namespace=NS, extra=flags)
    assert out.returncode != 0, f"{sets} rendered"
    assert "values don't meet the specifications of the schema" in out.stderr
    assert f"/{named.replace('.', '/')}" in out.stderr, out.stderr
    lint = helm.run("lint", str(CHART), *flags)
    assert lint.returncode != 0, f"{sets} passed lint"


def _stand_in(var: dict[str, Any]) -> str:
    """A value for a variable the cluster fills in (a Secret's key, the node's name)."""
    ref = var["valueFrom"]
    if "fieldRef" in ref:
        return "gpu-node-1"
    key = ref["secretKeyRef"]["key"]
    return "http://gpufrag:pw@clickhouse:8123/gpufrag" if key == "dsn" else "https://hooks:443/x"


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_commands_and_settings_are_ones_gpufrag_accepts(
    helm: Helm, value_set: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    for where, c in containers(render(helm, value_set)):
        # Every option name exists: Click parses them all before it answers --help. The app is
        # the one `main` builds for these arguments (in this process: a subprocess per
        # container took 1-3 s, most of this test's time; the entry point itself is tested in
        # test_cli_core and by the image's tests).
        out = runner.invoke(app_for(c["args"]), [*c["args"], "--help"])
        assert out.exit_code == 0, (where, out.output)
        assert out.output.startswith("Usage: "), (where, out.output)
        # Every GPUFRAG_ variable is a setting, with a value the settings model accepts (a
        # misspelt name is refused as unknown).
        for name in [n for n in os.environ if n.startswith("GPUFRAG_")]:
            monkeypatch.delenv(name)
        for var in c["env"]:
            if var["name"].startswith("GPUFRAG_"):
                monkeypatch.setenv(var["name"], var["value"] if "value" in var else _stand_in(var))
        settings = GpufragSettings()
        assert settings.guardrails.mode in ("dry-run", "enforce"), where
        assert NS in settings.guardrails.protected_namespaces, where
