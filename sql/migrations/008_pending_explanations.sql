-- Why pending pods could not run, each time the pending queue was evaluated.
CREATE TABLE IF NOT EXISTS pending_explanations
(
    run_id              String,
    ts                  DateTime64(3, 'UTC'),
    pod                 String,              -- namespace/name, or namespace/gang:NAME
    namespace           String,
    queue               Nullable(String),
    gpu_count           UInt16,
    gpu_milli           UInt16,
    cpu_milli           UInt32,
    memory_mib          UInt32,
    fits_cluster_total  UInt8,
    fits_some_node      UInt8,
    unplaceable         UInt8,
    reasons             Map(String, UInt32), -- blocking reason -> nodes it blocks
    near_misses         String,              -- JSON list
    nodes_checked       UInt32
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, pod, ts);
