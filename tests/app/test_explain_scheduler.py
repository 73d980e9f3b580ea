"""`gpufrag explain` with kube-scheduler's verdict stored beside gpufrag's reasons: both counts
per reason, when the scheduler said it, and whether the two agree."""

from __future__ import annotations

from pathlib import Path

from connectors.clickhouse import apply_migrations, default_sql_dir
from connectors.clickhouse.rows import explanation_row
from models.scheduler import PendingVerdict
from models.settings import UnplaceablePendingSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.profiles.join import NodeProfileUpdate, TaskProfileUpdate
from tests.app.pipeline_helpers import dsn_for, gpufrag, store_at
from tests.app.scripted_runs import finished_run
from tests.streams.profiles_helpers import at, node, only_detector, task

RUN = "run-sched"


def explained(theirs: PendingVerdict) -> list[dict[str, object]]:
    """Rows of the cluster operator's explanations of two pods: one the scheduler's verdict
    agrees with, one it does not."""
    a = ClusterAnalysis(
        detectors=only_detector(
            "unplaceable_pending", UnplaceablePendingSettings(evaluate_every_s=0)
        )
    )
    # a cordoned node, and one without the CPU the pods ask for
    a.apply(NodeProfileUpdate("a", node("a", gpus=(1000,), unschedulable=True), at(0)))
    a.apply(NodeProfileUpdate("b", node("b", gpus=(1000,), cpu_free=500), at(0)))
    agreeing = PendingVerdict(at=at(1), nodes=2, reasons={"unschedulable": 1, "cpu": 1})
    for key, verdict in (("ml/agrees", agreeing), ("ml/differs", theirs)):
        t = task(key, cpu=1_000, gpus=1, milli=1000).model_copy(update={"scheduler": verdict})
        a.apply(TaskProfileUpdate(key, t, at(1)))
    a.advance(at(1))
    report = a.report(at(1), explain=True)
    assert report.explanations is not None
    return [
        explanation_row(RUN, key, exp, t, report.at)
        for key, (exp, t) in sorted(report.explanations.items())
    ]


def stored(tmp_path: Path, theirs: PendingVerdict) -> str:
    """A store holding a finished run with the two pods' explanations; its DSN."""
    dsn = dsn_for(tmp_path / "store")
    with store_at(dsn) as st:
        apply_migrations(st, default_sql_dir())
        st.insert("pending_explanations", explained(theirs))
        st.insert("runs", [finished_run(RUN)])
    return dsn


def test_explain_prints_both_and_says_where_they_disagree(tmp_path: Path) -> None:
    dsn = stored(tmp_path, PendingVerdict(at=at(1), nodes=2, reasons={"taint": 1, "cpu": 1}))
    out = gpufrag(dsn, "explain", "ml/differs")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "nodes (gpufrag)" in text and "nodes (kube-scheduler)" in text
    lines = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()}
    assert lines["taint"] == ["-", "1"]  # the scheduler's alone
    assert lines["cpu"] == ["1", "1"] and lines["unschedulable"] == ["1", "-"]
    assert "kube-scheduler's verdict at 2024-01-01 00:00:01" in text
    assert "(0/2 nodes available)" in text
    assert "they disagree: the scheduler says taint on 1 of 2 nodes" in " ".join(text.split())
    agreeing = gpufrag(dsn, "explain", "ml/agrees")
    assert agreeing.returncode == 0, agreeing.stderr
    assert "agreement: the scheduler's reasons are among gpufrag's" in agreeing.stdout


def test_the_schedulers_own_words_are_printed_without_control_sequences(tmp_path: Path) -> None:
    hostile = "0/2 nodes\x1b[2J\x1b]0;owned\x07 are \x9bbusy\x00, \x1b[31mred\x1b[0m"
    theirs = PendingVerdict(at=at(1), reasons={"odd\x1b[1A": 1}, message=hostile)
    out = gpufrag(stored(tmp_path, theirs), "explain", "ml/differs")
    assert out.returncode == 0, out.stderr
    assert "not read, as it wrote it: 0/2 nodes are busy, red" in out.stdout
    assert not any(c in out.stdout for c in "\x1b\x07\x9b\x00")
