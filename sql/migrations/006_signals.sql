-- Signals as they opened and resolved: one row per (fingerprint, opened_at, state).
CREATE TABLE IF NOT EXISTS signals
(
    run_id       String,
    fingerprint  String,
    kind         LowCardinality(String),
    scope        LowCardinality(String),
    scope_id     String,
    severity     LowCardinality(String),
    state        LowCardinality(String),     -- open | resolved
    summary      String,
    evidence     String,                     -- JSON
    opened_at    DateTime64(3, 'UTC'),
    resolved_at  Nullable(DateTime64(3, 'UTC')),
    ts           DateTime64(3, 'UTC')        -- when this state was reached
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, fingerprint, opened_at, state);
