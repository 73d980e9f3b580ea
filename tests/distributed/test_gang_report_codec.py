"""A report with a gang's explanation crosses the distributed runner's codec whole, a report of
the previous version (no gang figures) still decodes, and `gpufrag sink` stores from it the
same gang row as the embedded runner does."""

from __future__ import annotations

import orjson

from connectors.clickhouse.rows import explanation_row
from models import DetectorSettings, GangRef
from models.analysis import InstantReport
from models.settings import UnplaceablePendingSettings
from streams.app.sinks.topic_history import HistoryRows
from streams.cluster_analysis import ClusterAnalysis
from streams.distributed.codec import decode_report, encode_report
from streams.profiles.join import NodeProfileUpdate, TaskProfileUpdate
from tests.streams.profiles_helpers import at, node, task

KEY = "ml/gang:job"


def gang_report() -> InstantReport:
    """Two 2-GPU members that each fit node n1 alone but not together (n2 and n3 have one
    card each): the gang's explanation, in the report of the instant that evaluated it."""
    a = ClusterAnalysis(
        detectors=DetectorSettings(
            unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=0)
        )
    )
    ref = GangRef(name="job", min_member=2)
    updates = [
        NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000)), at(0)),
        NodeProfileUpdate("n2", node("n2", gpus=(1000,)), at(0)),
        NodeProfileUpdate("n3", node("n3", gpus=(1000,)), at(0)),
        *(
            TaskProfileUpdate(k, task(k, gpus=2, milli=1000, gang=ref), at(1))
            for k in ("ml/w0", "ml/w1")
        ),
    ]
    for u in updates:
        a.apply(u)
    a.advance(at(1))
    return a.report(at(1))


def test_a_gang_explanation_survives_the_codec() -> None:
    report = gang_report()
    assert report.explanations is not None
    exp, member = report.explanations[KEY]
    assert exp.gang is not None and exp.gang.members == ("ml/w0", "ml/w1")
    assert member.key == exp.gang.shown == "ml/w1"
    assert decode_report(encode_report(report)) == report


def test_a_report_of_the_previous_version_without_gang_figures_still_decodes() -> None:
    body = orjson.loads(encode_report(gang_report()))
    del body["explanations"][KEY][0]["gang"]  # a worker not yet upgraded knows no gangs
    older = decode_report(orjson.dumps(body)).explanations
    assert older is not None
    assert older[KEY][0].gang is None and older[KEY][0].unplaceable


def test_the_sink_stores_the_gang_row_the_embedded_runner_stores() -> None:
    report = gang_report()
    assert report.explanations is not None
    embedded = [
        explanation_row("live", k, e, t, report.at)
        for k, (e, t) in sorted(report.explanations.items())
    ]
    history = HistoryRows(run_id="live", inputs=frozenset(), reports="p.reports")
    stored = [
        r
        for table, r in history.rows("p.reports", encode_report(report))
        if table != "cluster_frag"
    ]
    assert stored == embedded
    (row,) = stored
    assert (row["pod"], row["gang"], row["gang_members"]) == (KEY, "job", ["ml/w0", "ml/w1"])
    assert (row["gang_placeable_together"], row["gang_needed"]) == (1, 2)
