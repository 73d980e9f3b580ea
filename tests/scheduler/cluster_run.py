"""One run of the FGD paper's protocol on the real kube-scheduler: the arrivals created as Pods
one at a time, each waited for until the scheduler has bound it or given up on it (then it is
deleted: a dropped pod, as in the protocol), and the result read back from the API server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.spec import NodeSpec, PodSpec
from tests.deploy.kube_http import Kube
from tests.paths import REPO_ROOT
from tests.ports import free_port
from tests.scheduler.trace_objects import pod_object

SCHEDULER_SH = REPO_ROOT / "deploy" / "local" / "scheduler.sh"
WAIT_S = 120.0
"""For one pod's verdict, or a process to come up: seconds on a quiet machine, minutes on a
busy 2-core one."""
GPU_INDICES = "gpufrag.io/gpu-indices"


def wait_until(what: str, check: Any, *, timeout_s: float = WAIT_S, every_s: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


@dataclass(slots=True)
class Extender:
    process: subprocess.Popen[bytes]
    url: str
    metrics_url: str
    log: Path

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples that carry ``labels``, from the extender's /metrics."""
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and labels.items() <= sample.labels.items():
                    total += sample.value
        assert total or name in text, f"no {name} on {self.metrics_url}:\n{text[-2000:]}"
        return total

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)


@contextmanager
def extender(kubeconfig: Path, log: Path, *, policy: str = "fgd") -> Iterator[Extender]:
    port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "GPUFRAG_KUBE__KUBECONFIG": str(kubeconfig),
        # the view's lag behind the API server: the assume cache covers it either way
        "GPUFRAG_WATCH__ALLOWED_DELAY_S": "0.5",
        "GPUFRAG_EXTENDER__READY_AFTER_S": "1",
    }
    args = [sys.executable, "-m", "streams.app", "extender", "--policy", policy]
    args += ["--addr", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    ext = Extender(
        proc, f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{metrics_port}/metrics", log
    )
    try:

        def ready() -> bool:
            assert proc.poll() is None, f"the extender exited:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2):
                    return True
            except OSError:
                return False

        wait_until("the extender is ready", ready, every_s=0.2)
        yield ext
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


def start_scheduler(run_dir: Path, url: str, *, prioritize: bool) -> None:
    env = {
        **os.environ,
        "GPUFRAG_APISERVER_DIR": str(run_dir),
        "GPUFRAG_SCHEDULER_PRIORITIZE": "1" if prioritize else "0",
    }
    out = subprocess.run(
        ["bash", str(SCHEDULER_SH), "start", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, f"scheduler.sh start failed:\n{out.stderr[-3000:]}"


def stop_scheduler(run_dir: Path) -> None:
    env = {**os.environ, "GPUFRAG_APISERVER_DIR": str(run_dir)}
    subprocess.run(["bash", str(SCHEDULER_SH), "stop"], env=env, timeout=120, check=False)


def _verdict(kube: Kube, namespace: str, name: str) -> str | None:
    """ "bound", "unschedulable", or None while the scheduler has not decided."""
    status, pod = kube.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert status == 200, (status, pod)
    if pod["spec"].get("nodeName"):
        return "bound"
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return "unschedulable"
    return None


def arrive(kube: Kube, namespace: str, pods: Sequence[PodSpec]) -> tuple[int, int]:
    """Each pod created once the one before has its verdict; (placed, dropped)."""
    placed = dropped = 0
    for k, pod in enumerate(pods):
        name = f"p{k:05d}"
        status, body = kube.call(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods",
            pod_object(pod, namespace=namespace, name=name),
        )
        assert status == 201, (status, body)
        verdict = wait_until(f"a verdict on {name}", lambda n=name: _verdict(kube, namespace, n))
        if verdict == "bound":
            placed += 1
        else:
            dropped += 1
            status, body = kube.call(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0"
            )
            assert status in (200, 404), (status, body)
    return placed, dropped


@dataclass(frozen=True, slots=True)
class Outcome:
    placed: int
    dropped: int
    alloc_pct: float
    frag_amount_pct: float
    unannotated: int
    """Bound GPU pods without the extender's card annotation."""


def outcome(
    kube: Kube,
    namespace: str,
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    typical: TypicalPods,
    *,
    dropped: int,
) -> Outcome:
    """The bound pods laid on their annotated cards in a simulated copy of the nodes: a card
    handed out twice fails the bind there (``PlacementError``), which is the double-booking
    check; then the copy's allocation and FGD fragmentation."""
    by_name = {f"p{k:05d}": p for k, p in enumerate(pods)}
    cluster = SimCluster(nodes, measure=FragMeasure(typical))
    status, listed = kube.call("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, listed
    unannotated = placed = 0
    for item in listed["items"]:
        node = item["spec"].get("nodeName")
        if not node:
            continue
        placed += 1
        spec = by_name[item["metadata"]["name"]]
        raw = (item["metadata"].get("annotations") or {}).get(GPU_INDICES)
        uses_gpu = spec.shape.gpu_count > 0 and spec.shape.gpu_milli > 0
        if uses_gpu and raw is None:
            unannotated += 1
            continue
        cards = tuple(int(c) for c in raw.split(",")) if uses_gpu and raw else ()
        cluster.bind(cluster.index[node], spec, cards)
    cap = cluster.capacity_milli
    return Outcome(
        placed=placed,
        dropped=dropped,
        alloc_pct=cluster.allocated_milli / cap * 100,
        frag_amount_pct=cluster.frag_milli / cap * 100,
        unannotated=unannotated,
    )


def clear(kube: Kube, namespace: str) -> None:
    status, listed = kube.call("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, listed
    for item in listed.get("items", []):
        name = item["metadata"]["name"]
        kube.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0")

    def empty() -> bool:
        return not kube.call("GET", f"/api/v1/namespaces/{namespace}/pods")[1].get("items")

    wait_until(f"{namespace} emptied", empty, every_s=0.2)
