-- Nodes whose idle GPUs were stranded (too little CPU or memory left for any typical GPU
-- pod), per node pool: how many nodes, how much GPU, and how many are still stranded.
-- param: run_id String = latest
SELECT
    pool,
    uniqExact(scope_id)                                         AS nodes_ever,
    uniqExactIf(scope_id, still_open)                           AS nodes_now,
    round(sum(idle_gpu_milli) / 1000, 2)                        AS idle_gpus_at_open,
    groupUniqArray(5)(lacks)                                    AS lacking
FROM
(
    SELECT
        scope_id,
        ifNull(nullIf(JSONExtractString(argMax(evidence, ts), 'pool'), ''), '(none)') AS pool,
        argMax(state, ts) = 'open'                                             AS still_open,
        sumIf(JSONExtractUInt(evidence, 'idle_gpu_milli'), state = 'open')      AS idle_gpu_milli,
        arrayStringConcat(JSONExtract(argMax(evidence, ts), 'lacks', 'Array(String)'), '+') AS lacks
    FROM signals FINAL
    WHERE run_id = {run_id:String} AND kind = 'stranded_gpus'
    GROUP BY scope_id
)
GROUP BY pool
ORDER BY nodes_ever DESC, pool
