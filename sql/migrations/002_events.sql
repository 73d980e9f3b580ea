-- Raw input events as they crossed the bus. Kept 30 days after ingestion (event times of a
-- replayed trace lie in the past, so the TTL counts from when the row was written).
CREATE TABLE IF NOT EXISTS events
(
    run_id          String,
    id              String,
    kind            LowCardinality(String),
    key             String,
    event_time      DateTime64(3, 'UTC'),
    source          LowCardinality(String),
    schema_version  UInt16,
    payload         String,
    ingested_at     DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, kind, key, event_time, id)
TTL toDateTime(ingested_at) + INTERVAL 30 DAY;
