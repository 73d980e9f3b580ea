-- Proposed or executed actions with their audit evidence.
CREATE TABLE IF NOT EXISTS actions
(
    run_id              String,
    id                  String,
    kind                LowCardinality(String),
    mode                LowCardinality(String),
    outcome             LowCardinality(String),
    target_scope        LowCardinality(String),
    target              String,
    signal_fingerprint  Nullable(String),
    reason              String,
    evidence            String,
    created_at          DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, id);
