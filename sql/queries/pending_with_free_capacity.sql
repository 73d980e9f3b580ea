-- Pending pods that fit the cluster's free total but no node, by what blocked them: pods
-- affected per reason, and the most nodes that reason blocked at once. A gang whose members
-- fit the free total but not together counts once, under its first failing member's reasons.
-- param: run_id String = latest
SELECT
    reason,
    uniqExact(pod) AS pods,
    max(nodes)     AS max_nodes_blocked
FROM pending_explanations FINAL
ARRAY JOIN mapKeys(reasons) AS reason, mapValues(reasons) AS nodes
WHERE run_id = {run_id:String} AND unplaceable = 1
GROUP BY reason
ORDER BY pods DESC, reason
