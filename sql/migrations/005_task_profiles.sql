-- A task (pod) profile snapshot on every change (removed = 1 when the pod was deleted).
CREATE TABLE IF NOT EXISTS task_profiles
(
    run_id       String,
    ts           DateTime64(3, 'UTC'),
    seq          UInt64,
    pod          String,                     -- namespace/name
    namespace    String,
    queue        Nullable(String),
    tenant       Nullable(String),
    phase        LowCardinality(String),
    node         Nullable(String),
    cpu_milli    UInt32,
    memory_mib   UInt32,
    gpu_count    UInt16,
    gpu_milli    UInt16,                     -- per card; 1000 = whole cards
    created_at   DateTime64(3, 'UTC'),
    bound_at     Nullable(DateTime64(3, 'UTC')),
    wait_s       Nullable(Float64),
    oom_count    UInt32,
    removed      UInt8,
    profile      String
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, pod, ts, seq);
