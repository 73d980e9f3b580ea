"""`gpufrag inspect` on hostile or careless snapshots: each bad object is one line naming it
and why (exit 2, no traceback), a node its pods overfill is read with a warning, a wrong file
stops at its first bytes or at GPUFRAG_KUBE__SNAPSHOT_MAX_BYTES, and text the cluster wrote is
printed without its control sequences and cut when long."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.app.kubectl_snapshot import FIXTURE, edited
from tests.app.pipeline_helpers import gpufrag

UNUSED_STORE = "chdb:///nonexistent/inspect-uses-no-store"

Edit = Callable[[dict[str, Any]], None]


def _item(body: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in body["items"] if i["metadata"]["name"] == name)


def _mig_8g(body: dict[str, Any]) -> None:
    wanted = {"cpu": "1", "nvidia.com/mig-8g.80gb": "1"}
    resources = _item(body, "big-eval-0")["spec"]["containers"][0]["resources"]
    resources.update(requests=wanted, limits={"nvidia.com/mig-8g.80gb": "1"})


def _yesterday(body: dict[str, Any]) -> None:
    _item(body, "big-eval-0")["metadata"]["creationTimestamp"] = "yesterday"


def _half_gpu(body: dict[str, Any]) -> None:
    _item(body, "gpu-h100-01")["status"]["allocatable"]["nvidia.com/gpu"] = "500m"


def _replicas_above(body: dict[str, Any]) -> None:
    labels = _item(body, "gpu-h100-01")["metadata"]["labels"]
    labels["nvidia.com/gpu.replicas"] = "4"  # allocatable says 2: not even one card's replicas


def _mig_overflow(body: dict[str, Any]) -> None:
    node = _item(body, "gpu-a100-mig-01")
    node["metadata"]["labels"]["nvidia.com/gpu.count"] = "1"  # 2 x (3+2+1) slices on one card


def _node_twice(body: dict[str, Any]) -> None:
    body["items"].append(copy.deepcopy(_item(body, "gpu-h100-01")))


def _one_error(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpufrag: error: "), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_mig_8g, "Pod research/big-eval-0: requests: mig: Value error, MIG profile '8g.80gb' "
         "needs 8 compute slices; a card has 1..7"),
        (_yesterday, "Pod research/big-eval-0: unreadable (Failed to parse `yesterday`"),
        (_half_gpu, "Node gpu-h100-01: allocatable nvidia.com/gpu='500m' is not a whole number"),
        (_replicas_above, "Node gpu-h100-01: allocatable nvidia.com/gpu=2 is below one card's "
         "nvidia.com/gpu.replicas=4 replicas"),
        (_mig_overflow, "Node gpu-a100-mig-01: allocatable MIG instances need 12 compute slices; "
         "the node's 1 MIG cards"),
        (_node_twice, "Node gpu-h100-01: listed twice (items[3] and items[19])"),
    ],
    ids=["mig-8g", "creation-yesterday", "allocatable-500m", "replicas-above-allocatable",
         "mig-above-cards", "duplicate-node"],
)  # fmt: skip
def test_a_bad_object_is_one_line_naming_it(tmp_path: Path, edit: Edit, says: str) -> None:
    path = edited(tmp_path, edit)
    out = gpufrag(UNUSED_STORE, "inspect", "--kube-json", str(path), timeout=120)
    assert out.returncode == 2, out.stderr
    assert _one_error(out.stderr).startswith(f"gpufrag: error: {path}: {says}")


def _overfill_h100(body: dict[str, Any]) -> None:
    """Three more 2-GPU pods bound to the 2-card H100 node, which holds one already."""
    for k in range(3):
        extra = copy.deepcopy(_item(body, "triton-7"))
        extra["metadata"].update(name=f"extra-{k}", uid=f"extra-{k}")
        extra["spec"]["nodeName"] = "gpu-h100-01"
        extra["status"] = {"phase": "Running"}
        body["items"].append(extra)


def test_a_node_its_pods_overfill_is_read_with_a_warning_naming_it(tmp_path: Path) -> None:
    path = edited(tmp_path, _overfill_h100)
    expected = (
        f"{path}: Node gpu-h100-01: its 4 bound pods request more than it holds "
        "(7 nvidia.com/gpu of 2 allocatable); its free capacity and fragmentation are off"
    )
    out = gpufrag(UNUSED_STORE, "inspect", "--kube-json", str(path), "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines() == [f"gpufrag: warning: {expected}"]
    assert json.loads(out.stdout)["warnings"] == [expected]
    clean = gpufrag(UNUSED_STORE, "inspect", "--kube-json", str(FIXTURE), "--json", timeout=120)
    assert clean.stderr == "" and json.loads(clean.stdout)["warnings"] == []


def test_a_stream_that_is_no_json_stops_at_its_first_bytes() -> None:
    out = gpufrag(UNUSED_STORE, "inspect", "--kube-json", "/dev/zero", timeout=120)
    assert out.returncode == 2
    assert _one_error(out.stderr) == (
        "gpufrag: error: /dev/zero is not JSON (it starts with b'\\x00'); "
        "expected the output of kubectl get nodes,pods -A -o json"
    )


def test_a_snapshot_over_the_bound_names_its_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFRAG_KUBE__SNAPSHOT_MAX_BYTES", "50000")
    out = gpufrag(UNUSED_STORE, "inspect", "--kube-json", str(FIXTURE), timeout=120)
    assert out.returncode == 2
    assert _one_error(out.stderr) == (
        f"gpufrag: error: {FIXTURE} is over 50000 bytes (GPUFRAG_KUBE__SNAPSHOT_MAX_BYTES); "
        "kubectl's JSON is about 4.4 KB per object"
    )


def test_scheduler_text_is_printed_without_control_sequences_and_cut(tmp_path: Path) -> None:
    hostile = (
        "0/4 nodes\x1b[2J\x1b]0;owned\x07 are \x9b31mavailable\x00\r\n\tnext" + "x" * 5_000_000
    )

    def message(body: dict[str, Any]) -> None:
        conditions = _item(body, "big-eval-0")["status"]["conditions"]
        next(c for c in conditions if c["type"] == "PodScheduled")["message"] = hostile

    out = gpufrag(UNUSED_STORE, "inspect", "--kube-json", str(edited(tmp_path, message)))
    assert out.returncode == 0, out.stderr
    ours = out.stdout.split("  research/big-eval-0: ", 1)[1]
    shown = ours.split("    kube-scheduler: ", 1)[1].split("\n  ", 1)[0]
    clean = "0/4 nodes are 31mavailable\n\tnext"  # the C1 CSI byte goes, its text stays
    assert shown.startswith(clean + "x" * 100)
    assert not any(c in out.stdout for c in "\x1b\x07\x9b\x00\r")
    # 2,000 characters shown (MESSAGE_MAX_CHARS), the rest counted
    assert shown.endswith(f"x... ({5_000_000 - (2000 - len(clean))} more characters)")
    assert len(out.stdout) < 20_000
