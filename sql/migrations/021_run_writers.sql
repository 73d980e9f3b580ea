-- The processes that store one run's rows (several `gpufrag sink` in one group, against a
-- ClickHouse server): each beats while it stores and says when it stopped, so the run is marked
-- finished by the last to stop, not the first. A writer whose beat is older than three beats
-- died without stopping (kill -9) and is not waited for.
CREATE TABLE IF NOT EXISTS run_writers
(
    run_id        String,
    writer        String,                   -- host:pid:random, one per process
    state         LowCardinality(String),   -- storing | stopped
    beat_at       DateTime64(3, 'UTC'),
    stored        String                    -- JSON: what this writer stored, when it stopped
)
ENGINE = ReplacingMergeTree(beat_at)
ORDER BY (run_id, writer);
