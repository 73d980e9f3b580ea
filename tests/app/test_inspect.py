"""`gpufrag inspect` run as a user runs it, on the output of `kubectl get nodes,pods -A -o json`.

The snapshot (fixtures/kubectl_shared_gpus.json) has one node of each sharing mode, shaped as
GPU Feature Discovery, the GPU Operator and HAMi label and annotate them:

- gpu-a100-mig-01: 2 A100-80GB in MIG mixed strategy, ``all-balanced`` (1x3g.40gb, 1x2g.20gb,
  2x1g.10gb... per card as mig-parted lays it; here 2 of each in all), holding one 3g and one
  1g instance; the DCGM page of the existing fixtures reports its card 0's instances.
- gpu-t4-ts-01: 2 T4 time-sliced into 4 replicas each, 7 replicas held.
- gpu-v100-hami-01: 2 V100 32 GB registered by HAMi, split 10, two pods with 20,000 MiB each.
- gpu-h100-01: 2 whole H100, one held.
- pending, each with kube-scheduler's FailedScheduling condition: a 7g.80gb instance, two
  replicas, and a HAMi vGPU with 16,000 MiB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.app.kubectl_snapshot import FIXTURE, edited

DCGM_MIG = Path(__file__).resolve().parents[1] / "connectors" / "dcgm" / "fixtures" / "mig_a100.txt"


def gpufrag(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.app", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        input=stdin,
    )


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    out = gpufrag("inspect", "--kube-json", str(FIXTURE), "--dcgm", str(DCGM_MIG), "--json")
    assert out.returncode == 0, out.stderr
    body: dict[str, Any] = json.loads(out.stdout)
    return body


def cards(report: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return next(n["cards"] for n in report["nodes"] if n["name"] == node)


def test_every_card_is_counted_once_in_its_own_units(report: dict[str, Any]) -> None:
    assert report["gpus"] == 8
    # MIG 3g + 1g of 7 slices; 7 of 4+4 replicas; 20,000 of 32,768 MiB promised on each HAMi
    # card (no cores asked); one of two whole H100s
    expected = 4 / 7 + 7 / 4 + 2 * 20_000 / 32_768 + 1
    assert report["gpus_allocated"] == pytest.approx(expected, abs=1e-3)


def test_each_node_says_its_cards_mode_and_share(report: dict[str, Any]) -> None:
    mig = cards(report, "gpu-a100-mig-01")
    assert [c["mode"] for c in mig] == ["mig", "mig"]
    assert [round(c["alloc_fraction"], 4) for c in mig] == [round(4 / 7, 4), 0.0]
    # the exporter's three instance readings of card 0 summed: 31,744 + 0 + 9,216
    assert mig[0]["memory_used_mib"] == 40_960.0 and mig[1]["memory_used_mib"] is None
    assert mig[0]["instance_memory_used_mib"] == {"1": 31_744.0, "5": 0.0, "13": 9_216.0}
    # each instance the exporter names with a pod is that pod's own figure
    assert mig[0]["pod_memory_mib"] == {
        "notebooks/jupyter-carol-4d8p2": 9_216.0,
        "research/bert-pretrain-0": 31_744.0,
    }
    ts = cards(report, "gpu-t4-ts-01")
    assert [(c["mode"], c["alloc_fraction"]) for c in ts] == [
        ("time-sliced", 1.0),
        ("time-sliced", 0.75),
    ]
    assert ts[1]["memory_shared"] and len(ts[0]["pods"]) + len(ts[1]["pods"]) == 7
    hami = cards(report, "gpu-v100-hami-01")
    assert [c["mode"] for c in hami] == ["hami", "hami"]
    assert [c["pods"] for c in hami] == [["llm/lora-0"], ["llm/lora-1"]]
    assert [c["alloc_fraction"] for c in cards(report, "gpu-h100-01")] == [1.0, 0.0]


def test_fragmentation_is_a_share_of_the_cards(report: dict[str, Any]) -> None:
    idle_pct = (8 - report["gpus_allocated"]) / 8 * 100
    assert 0 < report["frag_amount_pct"] <= idle_pct + 0.01
    assert report["frag_ratio_pct"] >= report["frag_amount_pct"]


def test_each_pending_pod_has_its_blocking_reasons(report: dict[str, Any]) -> None:
    pending = {p["pod"]: p for p in report["pending"]}
    assert set(pending) == {"research/big-eval-0", "serving/triton-7", "llm/lora-2"}
    big = pending["research/big-eval-0"]
    # free instances on the MIG node, none of 7g.80gb; no MIG at all elsewhere
    assert big["blocking"] == {"gpu_count": 3, "mig_profile": 1}
    assert not big["fits_cluster_total"] and not big["fits_some_node"]
    two = pending["serving/triton-7"]
    # one replica left on the T4s, one H100 free, none on MIG; a HAMi vGPU without gpumem
    # takes a whole card's memory, and neither V100 has it
    assert two["blocking"] == {"gpu_count": 3, "gpu_memory": 1}
    assert two["fits_cluster_total"] and not two["fits_some_node"]
    lora = pending["llm/lora-2"]
    # 12,768 MiB unpromised on each V100, 25,536 in all; only HAMi places a gpumem request
    assert lora["blocking"] == {"gpu_count": 3, "gpu_memory": 1}
    assert lora["fits_cluster_total"] and not lora["fits_some_node"]
    assert lora["closest_nodes"][0] == "gpu-v100-hami-01"
    assert "CardInsufficientMemory" in lora["scheduler_message"]


def test_the_text_view_names_modes_units_and_verdicts() -> None:
    out = gpufrag("inspect", "--kube-json", str(FIXTURE), "--dcgm", str(DCGM_MIG))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("8 GPUs, 4.54 allocated; fragmentation ")
    assert "card 1 [time-sliced] 75% allocated: 3 of 4 replicas used (shared by " in text
    assert "card 0 [mig] 57% allocated: instances used 1x1g.10gb, 1x3g.40gb; free 1x2g.20gb" in text
    assert "12768 MiB unpromised" in text
    assert "llm/lora-2: fragmentation: the free total fits, no node does" in text
    assert "research/big-eval-0: the cluster lacks the free capacity" in text


def test_stdin_is_read_with_a_dash() -> None:
    out = gpufrag("inspect", "--kube-json", "-", "--json", stdin=FIXTURE.read_text())
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["gpus"] == 8


def test_a_malformed_object_gets_one_line_naming_it_and_exit_2(tmp_path: Path) -> None:
    def bad_replicas(body: dict[str, Any]) -> None:
        body["items"][1]["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "four"

    out = gpufrag("inspect", "--kube-json", str(edited(tmp_path, bad_replicas)))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"gpufrag: error: {tmp_path / 'snapshot.json'}: Node gpu-t4-ts-01: "
        "label nvidia.com/gpu.replicas='four' is not an integer"
    ]


def test_a_pod_with_a_bad_quantity_is_named_with_its_namespace(tmp_path: Path) -> None:
    def bad_memory(body: dict[str, Any]) -> None:
        body["items"][-1]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "lots"

    out = gpufrag("inspect", "--kube-json", str(edited(tmp_path, bad_memory)))
    assert out.returncode == 2
    line = out.stderr.strip()
    assert line.startswith("gpufrag: error: ") and "Pod llm/lora-2: " in line and "'lots'" in line
    assert "\n" not in line and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json at all", "is not JSON"),
        ('{"kind": "Node", "metadata": {"name": "x"}}', "is not a list of objects (kind 'Node')"),
    ],
)
def test_a_file_that_is_no_kubectl_list_is_refused(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    out = gpufrag("inspect", "--kube-json", str(path))
    assert out.returncode == 2 and says in out.stderr


def test_objects_of_other_kinds_are_counted_not_fatal(tmp_path: Path) -> None:
    def add_service(body: dict[str, Any]) -> None:
        body["items"].append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "triton", "namespace": "serving"},
                "spec": {"ports": [{"port": 8000}]},
            }
        )

    out = gpufrag("inspect", "--kube-json", str(edited(tmp_path, add_service)), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["left_out"] == {"Service": 1}
    text = gpufrag("inspect", "--kube-json", str(edited(tmp_path, add_service)))
    assert "left out (not nodes or pods): 1 Service" in text.stdout


def test_a_missing_file_is_one_line() -> None:
    out = gpufrag("inspect", "--kube-json", "/nonexistent/snapshot.json")
    assert out.returncode == 2
    assert out.stderr.strip() == "gpufrag: error: file not found: /nonexistent/snapshot.json"


def test_a_snapshot_without_gpu_pods_says_the_fragmentation_means_little(tmp_path: Path) -> None:
    def nodes_only(body: dict[str, Any]) -> None:
        body["items"] = [i for i in body["items"] if i["kind"] == "Node"]

    out = gpufrag("inspect", "--kube-json", str(edited(tmp_path, nodes_only)))
    assert out.returncode == 0, out.stderr
    assert "no pod in the snapshot asks for a GPU" in out.stdout


def test_a_node_problem_condition_shows_its_cards_out_of_service(tmp_path: Path) -> None:
    snapshot = json.loads(FIXTURE.read_text())
    node = next(i for i in snapshot["items"] if i["metadata"]["name"] == "gpu-h100-01")
    node["status"].setdefault("conditions", []).append(
        {"type": "GpuUnhealthy", "status": "True", "reason": "XidError", "message": "Xid 79"}
    )
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    out = gpufrag("inspect", "--kube-json", str(path), "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert [c["healthy"] for c in cards(body, "gpu-h100-01")] == [False, False]
    assert all(c["healthy"] for c in cards(body, "gpu-t4-ts-01"))
    text = gpufrag("inspect", "--kube-json", str(path)).stdout
    assert "out of service: node problem condition" in text
