-- Cluster fragmentation per minute of event time: amount (% of all GPUs the typical pods
-- cannot use), ratio (% of idle GPU that is fragment), allocation, and the pending picture.
-- param: run_id String = latest
SELECT
    minute,
    round(frag_amount_pct, 3) AS frag_amount_pct,
    round(frag_ratio_pct, 3)  AS frag_ratio_pct,
    round(alloc_pct, 3)       AS alloc_pct,
    pending_pods_max,
    unplaceable_pods_max,
    stranded_nodes_max
FROM cluster_frag_1m
WHERE run_id = {run_id:String}
ORDER BY minute
