-- Rows that could never be written, with the reason: nothing is dropped silently.
CREATE TABLE IF NOT EXISTS dead_letter
(
    id          String,                      -- hash of table and row, so a retry dedupes
    ts          DateTime64(3, 'UTC'),
    target      LowCardinality(String),      -- the table the row was meant for
    reason      String,
    row         String                       -- the row as JSON
)
ENGINE = ReplacingMergeTree
ORDER BY (target, id);
