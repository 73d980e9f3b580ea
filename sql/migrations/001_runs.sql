-- One row per replay (or live session) and its outcome; later rows for the same run_id win.
CREATE TABLE IF NOT EXISTS runs
(
    run_id      String,
    started_at  DateTime64(3, 'UTC'),
    updated_at  DateTime64(3, 'UTC'),
    status      LowCardinality(String),   -- running | finished | interrupted | failed | abandoned
    source      String,                   -- e.g. trace:openb_pod_list_default
    mode        LowCardinality(String),
    policy      LowCardinality(String),
    seed        Int64,
    params      String,                   -- JSON of every replay option
    summary     String                    -- JSON summary, filled when the run ends
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY run_id;
