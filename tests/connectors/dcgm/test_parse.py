"""Exporter pages in the exporter's own formats -> GpuSamples; bad lines cost only themselves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connectors.dcgm.samples import TimedSample
from models import Envelope, GpuSampleEvent, from_json, to_json
from tests.connectors.dcgm.helpers import SCRAPED, by_gpu, page, parse

H200_0 = "GPU-fb685150-e4d3-e02d-6582-22ee58c3cad9"
A100_LABELS = 'gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB"'


def test_plain_page_maps_every_field_in_mib_pct_and_ratio() -> None:
    result = parse(page("plain_h200.txt"), node="ignored-when-hostname-present")
    assert result.rejected == [] and result.blanks == 0
    gpus = by_gpu(result)
    assert set(gpus) == {(0, None), (1, None)}
    idle, busy = gpus[(0, None)], gpus[(1, None)]
    assert idle.node == busy.node == "gpu-h200-07"  # the Hostname label wins over the default
    assert idle.uuid == H200_0 and idle.model == "NVIDIA H200"
    # The H200's real numbers (nvidia-smi: total 143771 MiB, reserved 616, free 143156).
    assert (idle.memory_used_mib, idle.memory_reserved_mib) == (0.0, 616.0)
    assert idle.memory_total_mib == 0 + 143156 + 616
    assert busy.memory_used_mib == 102400.0 and busy.memory_total_mib == 143772.0
    assert busy.utilization_pct == 97.0 and busy.engine_active == pytest.approx(0.934512)
    assert idle.xid is None  # DCGM's 0: no XID since the driver loaded
    assert idle.xid_from == "gauge"  # read again at every scrape, not an event
    assert (busy.rows_remapped_correctable, busy.rows_remapped_uncorrectable) == (2, 0)
    assert busy.row_remap_failed is False and busy.row_remap_pending is False
    assert busy.pod is None and busy.mig_instance is None
    assert all(t.at == SCRAPED for t in result.samples)


def test_kubernetes_pods_one_owner_per_card_shared_cards_none() -> None:
    result = parse(page("kubernetes_pods.txt"))
    assert result.rejected == []
    gpus = by_gpu(result)
    owned = gpus[(0, None)]
    assert (owned.namespace, owned.pod, owned.container) == ("ml-train", "llama-ft-0", "trainer")
    shared = gpus[(1, None)]  # time-sliced: one line per pod, two pods
    assert shared.pod is None and shared.namespace is None
    assert shared.memory_used_mib == 28826.0  # the clones' card-level value, counted once
    free = gpus[(2, None)]  # pod="" on every line: the exporter's "no pod"
    assert free.pod is None
    # Without DCGM_FI_DEV_FB_RESERVED (the default counters) the total is not guessed.
    assert owned.memory_total_mib is None and owned.memory_used_mib == 79407.0


def test_old_namespace_labels_and_a_page_without_hostname() -> None:
    result = parse(page("legacy_old_namespace.txt"), node="t4-node-2")
    assert result.rejected == []
    gpus = by_gpu(result)
    serving = gpus[(0, None)]
    assert serving.node == "t4-node-2"
    assert serving.uuid == "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"  # lowercase `uuid` label
    assert (serving.namespace, serving.pod, serving.container) == (
        "inference",
        "resnet-serve-6b8d9-x2x7q",
        "server",
    )
    assert gpus[(1, None)].pod is None
    assert result.blanks == 0  # the MEMORY_TEMP sentinel is on a field no sample uses


def test_without_hostname_or_default_node_every_gpu_line_is_refused() -> None:
    result = parse(page("legacy_old_namespace.txt"))
    assert result.samples == []
    assert len(result.rejected) == 8
    assert {r.kind for r in result.rejected} == {"labels"}
    assert "no Hostname label" in result.rejected[0].reason


def test_prometheus_exported_labels_and_line_timestamps() -> None:
    result = parse(page("federated_exported_labels.txt"))
    assert result.rejected == []
    gpus = {t.sample.gpu_index: t for t in result.samples}
    owned = gpus[0].sample
    assert (owned.namespace, owned.pod, owned.container) == ("ml-train", "llama-ft-0", "trainer")
    # GPU 1 carries only Prometheus' own pod label (the exporter's pod): not an owner.
    assert gpus[1].sample.pod is None and gpus[1].sample.namespace is None
    # The event time is the latest timestamp written on the sample's lines.
    assert gpus[0].at == datetime.fromtimestamp(1732924815.123, UTC)
    assert owned.memory_total_mib == 143772.0


def test_mig_instances_are_samples_of_their_own() -> None:
    result = parse(page("mig_a100.txt"))
    assert result.rejected == []
    gpus = by_gpu(result)
    assert set(gpus) == {(0, 1), (0, 5), (0, 13)}
    big, idle, small = gpus[(0, 1)], gpus[(0, 5)], gpus[(0, 13)]
    assert (big.mig_profile, big.memory_used_mib, big.memory_total_mib) == (
        "3g.40gb",
        31744.0,
        40192.0,
    )
    assert (big.namespace, big.pod) == ("research", "bert-pretrain-0")
    assert idle.mig_profile == "2g.20gb" and idle.pod is None
    assert small.mig_profile == "1g.10gb" and small.memory_total_mib == 9728.0
    assert small.pod == "jupyter-carol-4d8p2" and small.utilization_pct is None
    assert {g.uuid for g in gpus.values()} == {"GPU-9f1d3a5b-27c4-4e88-b6d0-8a2e4c7f1b39"}


def test_xid_gauge_counts_and_row_remapping() -> None:
    result = parse(page("xid_h100.txt"))
    assert result.rejected == []
    gpus = by_gpu(result)
    quiet, fell_off, remap = gpus[(0, None)], gpus[(1, None)], gpus[(2, None)]
    assert quiet.xid is None and quiet.xid_counts == {} and quiet.xid_window_ms == 300000
    assert fell_off.xid == 79 and fell_off.xid_counts == {79: 1, 13: 4}
    assert remap.xid == 63 and remap.xid_counts == {63: 1}
    assert remap.row_remap_pending is True and remap.rows_remapped_uncorrectable == 1
    assert fell_off.rows_remapped_correctable == 3


def test_blank_sentinels_become_unknown_never_numbers() -> None:
    result = parse(page("blanks_a100.txt"))
    assert result.rejected == []
    assert result.blanks == 7
    gpus = by_gpu(result)
    blanked = gpus[(0, None)]  # every mapped field but FB_FREE and FB_RESERVED was a sentinel
    assert blanked.memory_used_mib is None
    assert blanked.memory_total_mib is None  # used unknown -> total unknown, not free + reserved
    assert blanked.utilization_pct is None and blanked.engine_active is None
    assert blanked.xid is None and blanked.rows_remapped_correctable is None
    assert blanked.row_remap_pending is None
    fine = gpus[(1, None)]
    assert fine.memory_used_mib == 20480.0 and fine.utilization_pct == 55.0
    assert fine.engine_active is None  # DCGM_FP64_BLANK printed with %f


def test_malformed_page_refuses_bad_lines_by_number_and_uses_the_rest() -> None:
    result = parse(page("malformed_h200.txt"))
    assert [(r.line_no, r.kind) for r in result.rejected] == [
        (4, "syntax"),  # value "fast" (an unmapped metric: still a bad line)
        (8, "value"),  # utilization 250 %
        (9, "syntax"),  # garbage
        (13, "syntax"),  # "1O2400"
        (14, "labels"),  # no gpu label
        (22, "syntax"),  # truncated at the end of the page
    ]
    assert "250 % is over 100" in result.rejected[1].reason
    gpus = by_gpu(result)
    good, hurt = gpus[(0, None)], gpus[(1, None)]
    assert (good.memory_used_mib, good.memory_total_mib, good.utilization_pct) == (
        0.0,
        143772.0,
        0.0,
    )
    assert hurt.memory_reserved_mib == 616.0
    assert hurt.memory_used_mib is None and hurt.utilization_pct is None
    assert hurt.memory_total_mib is None


def line(name: str, value: str, extra: str = "", labels: str = A100_LABELS) -> str:
    return f'{name}{{{labels},Hostname="n1"{extra}}} {value}\n'


def test_uncorrectable_ecc_errors_are_read_as_a_count() -> None:
    (sample,) = parse(line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "3")).samples
    assert sample.sample.ecc_uncorrected_volatile == 3
    assert parse(line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "2.5")).rejected


@pytest.mark.parametrize(
    ("text", "kind", "reason"),
    [
        (line("DCGM_FI_DEV_FB_USED", "-5"), "value", "negative"),
        (line("DCGM_FI_DEV_FB_USED", "+Inf"), "value", "infinite"),
        (line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1.5"), "value", "over 1"),
        (line("DCGM_FI_DEV_ROW_REMAP_PENDING", "2"), "value", "not 0 or 1"),
        (line("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "2.5"), "value", "whole number"),
        (line("DCGM_EXP_XID_ERRORS_COUNT", "1", ',xid="x79"'), "labels", "bad xid"),
        (line("DCGM_FI_DEV_FB_USED", "1", ',GPU_I_ID="a"'), "labels", "MIG instance"),
        (line("DCGM_FI_DEV_FB_USED", "1", labels='gpu="-1"'), "labels", "no GPU index"),
        (line("DCGM_FI_DEV_FB_USED", "1 notatime"), "syntax", "unreadable"),
        ('DCGM_FI_DEV_FB_USED{gpu="0",gpu="1"} 1\n', "syntax", "unreadable"),
    ],
)
def test_each_bad_value_is_refused_with_its_reason(text: str, kind: str, reason: str) -> None:
    good = line("DCGM_FI_DEV_GPU_UTIL", "12")
    result = parse(good + text)
    assert [(r.line_no, r.kind) for r in result.rejected] == [(2, kind)]
    assert reason in result.rejected[0].reason
    assert [t.sample.utilization_pct for t in result.samples] == [12.0]


def test_undecodable_bytes_cost_one_line() -> None:
    data = line("DCGM_FI_DEV_GPU_UTIL", "7").encode() + b'DCGM_FI_DEV_FB_USED{gpu="0\xff"} 1\n'
    result = parse(data)
    assert [(r.line_no, r.kind) for r in result.rejected] == [(2, "encoding")]
    assert result.samples[0].sample.utilization_pct == 7.0


def test_label_variants_device_index_and_lowercase_hostname() -> None:
    text = (
        'DCGM_FI_DEV_FB_USED{device="nvidia3",hostname="n7",exported_pod_name="p",'
        'exported_pod_namespace="ns",container_name="c"} 10\n'
    )
    (timed,) = parse(text).samples
    sample = timed.sample
    assert (sample.node, sample.gpu_index) == ("n7", 3)
    assert (sample.namespace, sample.pod, sample.container) == ("ns", "p", "c")


def test_fb_total_wins_and_an_impossible_total_refuses_the_sample() -> None:
    ok = line("DCGM_FI_DEV_FB_TOTAL", "81920") + line("DCGM_FI_DEV_FB_USED", "1024")
    (timed,) = parse(ok).samples
    assert timed.sample.memory_total_mib == 81920.0
    bad = line("DCGM_FI_DEV_FB_TOTAL", "100") + line("DCGM_FI_DEV_FB_USED", "1024")
    result = parse(bad)
    assert result.samples == []
    assert [(r.line_no, r.kind) for r in result.rejected] == [(1, "value")]
    assert "exceeds" in result.rejected[0].reason


def test_own_timestamp_is_the_event_time() -> None:
    (timed,) = parse(line("DCGM_FI_DEV_GPU_UTIL", "3 1700000000500")).samples
    assert timed.at == datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)


def test_new_fields_survive_the_bus() -> None:
    (timed,) = [t for t in parse(page("xid_h100.txt")).samples if t.sample.gpu_index == 1]
    assert isinstance(timed, TimedSample)
    env = Envelope.wrap(GpuSampleEvent(sample=timed.sample), event_time=timed.at, source="dcgm")
    back = from_json(Envelope, to_json(env))
    assert back == env
    assert isinstance(back.payload, GpuSampleEvent)
    assert back.payload.sample.xid_counts == {79: 1, 13: 4}
