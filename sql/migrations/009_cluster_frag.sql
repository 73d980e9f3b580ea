-- The cluster's fragmentation after each evaluation, and its per-minute rollup. The rollup is a
-- plain view over the deduplicated table: a materialized view would count a retried insert
-- block twice, this cannot.
CREATE TABLE IF NOT EXISTS cluster_frag
(
    run_id           String,
    ts               DateTime64(3, 'UTC'),
    nodes            UInt32,
    capacity_gpus    Float64,
    idle_gpus        Float64,
    frag_gpus        Float64,
    frag_amount_pct  Float64,
    frag_ratio_pct   Float64,
    alloc_pct        Float64,
    arrived_pct      Nullable(Float64),      -- GPU demand of the pods seen so far, % of capacity
    typical_pods     UInt16,
    pending_pods     UInt32,
    unplaceable_pods UInt32,
    stranded_nodes   UInt32
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, ts);

CREATE VIEW IF NOT EXISTS cluster_frag_1m AS
SELECT
    run_id,
    toStartOfMinute(ts)   AS minute,
    avg(frag_amount_pct)  AS frag_amount_pct,
    avg(frag_ratio_pct)   AS frag_ratio_pct,
    avg(alloc_pct)        AS alloc_pct,
    max(pending_pods)     AS pending_pods_max,
    max(unplaceable_pods) AS unplaceable_pods_max,
    max(stranded_nodes)   AS stranded_nodes_max,
    count()               AS samples
FROM cluster_frag FINAL
GROUP BY run_id, minute;
