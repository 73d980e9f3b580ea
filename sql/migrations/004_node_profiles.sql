-- A node profile snapshot on every change (removed = 1 when the node left).
CREATE TABLE IF NOT EXISTS node_profiles
(
    run_id           String,
    ts               DateTime64(3, 'UTC'),
    seq              UInt64,                 -- order of changes within one instant
    node             String,
    pool             Nullable(String),
    gpu_model        LowCardinality(Nullable(String)),
    gpus             UInt16,
    gpu_milli_free   UInt32,                 -- healthy cards only
    gpus_full_free   UInt16,
    cpu_milli_free   Int64,
    memory_mib_free  Int64,
    unschedulable    UInt8,
    pods             UInt32,
    removed          UInt8,
    profile          String                  -- the NodeProfile as JSON
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, node, ts, seq);
