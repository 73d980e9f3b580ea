-- GPU telemetry, one row per card and sample, partitioned by day of the sample.
CREATE TABLE IF NOT EXISTS gpu_samples
(
    run_id            String,
    event_id          String,
    ts                DateTime64(3, 'UTC'),
    node              String,
    gpu_index         UInt16,
    uuid              Nullable(String),
    model             LowCardinality(Nullable(String)),
    memory_total_mib  Nullable(Float64),
    memory_used_mib   Nullable(Float64),
    utilization_pct   Nullable(Float64),
    xid               Nullable(UInt32),
    pod               Nullable(String),
    namespace         Nullable(String)
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (run_id, node, gpu_index, ts, event_id);
