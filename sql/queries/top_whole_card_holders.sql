-- Namespaces by whole GPU cards held (card-hours of event time), the usual suspects when
-- small jobs cannot find a card.
-- param: run_id String = latest
-- param: limit UInt32 = 20
WITH
    (SELECT max(ts) FROM task_profiles FINAL WHERE run_id = {run_id:String}) AS run_end,
    per_pod AS
    (
        SELECT
            pod,
            any(namespace)                                  AS namespace,
            argMaxIf(gpu_count, ts, removed = 0)             AS cards,
            argMaxIf(gpu_milli, ts, removed = 0)             AS milli,
            minIf(ts, node IS NOT NULL AND removed = 0)      AS bound,
            countIf(node IS NOT NULL AND removed = 0) > 0    AS was_bound,
            maxIf(ts, removed = 1)                           AS gone,
            countIf(removed = 1) > 0                         AS was_removed
        FROM task_profiles FINAL
        WHERE run_id = {run_id:String}
        GROUP BY pod
    )
SELECT
    namespace,
    count()                                                          AS pods,
    sum(cards)                                                       AS whole_cards,
    round(sum(cards * dateDiff('second', bound, if(was_removed, gone, run_end))) / 3600, 2)
                                                                     AS card_hours
FROM per_pod
WHERE was_bound AND milli = 1000
GROUP BY namespace
ORDER BY card_hours DESC, namespace
LIMIT {limit:UInt32}
