"""gpufrag's extender in front of the real kube-scheduler, on the real kube-apiserver (issue 28).

100 nodes of the bundled node list (chosen with a seed) become Node objects, marked Ready by the
test (no kubelet). The default pod list arrives as Pods under the FGD paper's protocol, shuffled
with the seed, up to 1.0x the GPU capacity, one at a time; a pod the scheduler cannot place is
dropped. The same arrivals run twice: the scheduler's default scoring (the extender only
filters and binds, so shared cards are still counted per card, on the tightest card as the
device plugin would), then with the extender's FGD prioritize and card choice. Both runs'
figures are printed; docs/extender.md keeps them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from connectors.trace.alibaba_csv import TraceNode, read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import TraceSettings
from streams.app.replaying.workload import node_spec, pod_shape, pod_spec
from streams.fragmentation.shapes import PodShape, TypicalPods
from streams.placement.experiment import arrival_sequence
from streams.placement.spec import PodSpec
from tests.deploy.kube_http import Kube
from tests.local_apiserver import apiserver_at
from tests.scheduler import cluster_run as cr
from tests.scheduler.trace_objects import node_object, pod_object

pytestmark = pytest.mark.scheduler

SEED = 42
NODES = 100
RATIO = 1.0
RUNS = (
    # no prioritize: kube-scheduler's default scoring picks the node; the extender filters by
    # card and binds, its cards chosen by a score-only policy's rule, the device plugin's
    # tightest card (which policy does not matter: none is asked to score)
    ("default scoring", "best-fit", False),
    ("fgd extender", "fgd", True),
)
SPARE = "spare-node"
SPARE_TAINT = {"key": "gpufrag-test/spare", "value": "yes", "effect": "NoSchedule"}


def _untaint(kube: Kube, name: str, taints: list[dict[str, str]]) -> None:
    """The API server's admission gives every new Node the not-ready taint, and no node
    controller runs here to take it away."""
    status, node = kube.call("GET", f"/api/v1/nodes/{name}")
    assert status == 200, node
    node["spec"]["taints"] = taints
    status, body = kube.call("PUT", f"/api/v1/nodes/{name}", node)
    assert status == 200, body


def test_fgd_scoring_allocates_more_and_fragments_less_than_default_scoring(
    tmp_path: Path,
) -> None:
    settings = TraceSettings()
    rng = np.random.default_rng(SEED)
    every = read_nodes(bundled_nodes_path(), settings=settings)
    chosen = [every[int(i)] for i in sorted(rng.choice(len(every), NODES, replace=False))]
    trace_pods = read_pods(bundled_pods_path(), settings=settings)
    typical = TypicalPods.from_shapes(map(pod_shape, trace_pods))
    nodes = [node_spec(n) for n in chosen]
    capacity = sum(n.gpu_count for n in nodes) * 1000
    arrivals = arrival_sequence(
        [pod_spec(p) for p in trace_pods], capacity_milli=capacity, ratio=RATIO, rng=rng
    )
    with apiserver_at(tmp_path / "apiserver") as api:
        run_dir = api.ca_cert.parent.parent
        kube = Kube(api)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        for n in chosen:
            status, body = kube.call("POST", "/api/v1/nodes", node_object(n))
            assert status == 201, body
            _untaint(kube, n.name, [])
        spare = TraceNode(SPARE, 64_000, 262_144, 8, chosen[0].gpu_model)
        assert kube.call("POST", "/api/v1/nodes", node_object(spare))[0] == 201
        _untaint(kube, SPARE, [SPARE_TAINT])
        figures: dict[str, dict[str, object]] = {}
        try:
            for label, policy, prioritize in RUNS:
                ns = label.replace(" ", "-")
                assert (
                    kube.call(
                        "POST",
                        "/api/v1/namespaces",
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    )[0]
                    == 201
                )
                with cr.extender(kubeconfig, tmp_path / f"{ns}.log", policy=policy) as ext:
                    cr.start_scheduler(run_dir, ext.url, prioritize=prioritize)
                    placed, dropped = cr.arrive(kube, ns, arrivals)
                    calls = {
                        v: ext.metric("gpufrag_extender_requests_total", verb=v, outcome="ok")
                        for v in ("filter", "prioritize", "bind")
                    }
                    out = cr.outcome(kube, ns, nodes, arrivals, typical, dropped=dropped)
                    figures[label] = {
                        "placed": out.placed,
                        "dropped": out.dropped,
                        "alloc_pct": round(out.alloc_pct, 2),
                        "frag_amount_pct": round(out.frag_amount_pct, 2),
                        "unannotated": out.unannotated,
                        "extender_calls": calls,
                    }
                    assert out.placed == placed and out.unannotated == 0, figures
                    if prioritize:
                        _killed_extender_does_not_stop_scheduling(kube, ns, ext)
                cr.clear(kube, ns)
        finally:
            cr.stop_scheduler(run_dir)
        print(
            json.dumps(
                {
                    "nodes": NODES,
                    "gpus": capacity // 1000,
                    "arrivals": len(arrivals),
                    "seed": SEED,
                    **figures,
                },
                indent=2,
            )
        )
        base, fgd = figures["default scoring"], figures["fgd extender"]
        assert fgd["extender_calls"]["prioritize"] > 0 and base["extender_calls"]["prioritize"] == 0
        assert fgd["alloc_pct"] > base["alloc_pct"], figures
        assert fgd["frag_amount_pct"] < base["frag_amount_pct"], figures


def _killed_extender_does_not_stop_scheduling(kube: Kube, ns: str, ext: cr.Extender) -> None:
    """A short run onto the spare node, the extender killed halfway: every pod is bound, the
    first half by the extender (its card annotation on them), the rest by the scheduler's own
    binder once the extender is gone (it is ignorable)."""
    shares = 12
    for k in range(shares):
        if k == shares // 2:
            ext.kill()
        name = f"spare-{k:02d}"
        pod = pod_object(
            PodSpec(name, PodShape(cpu_milli=1000, gpu_milli=250, gpu_count=1), 1024),
            namespace=ns,
            name=name,
        )
        pod["spec"]["tolerations"] = [{**SPARE_TAINT, "operator": "Equal"}]
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": SPARE}
        status, body = kube.call("POST", f"/api/v1/namespaces/{ns}/pods", pod)
        assert status == 201, body

        def bound(n: str = name) -> dict[str, object] | None:
            found = kube.call("GET", f"/api/v1/namespaces/{ns}/pods/{n}")[1]
            return found if found["spec"].get("nodeName") else None

        found = cr.wait_until(
            f"{name} bound ({'after' if k >= shares // 2 else 'before'} the kill)", bound
        )
        annotated = cr.GPU_INDICES in (found["metadata"].get("annotations") or {})
        assert annotated is (k < shares // 2), (name, found["metadata"])
