-- Pods holding whole GPU cards, with how much of them they used: card-hours held, and over the
-- readings that name the pod, the peak memory share and the mean and peak engine activity
-- (DCGM's engine activity, else utilization). verdict: idle (peak activity below 1 %),
-- small_work (peak memory below memory_pct and peak activity below activity_pct: a replica or a
-- MIG instance would serve it), busy; or, where the readings cannot tell: no_samples (none names
-- the pod), no_activity (none has an activity figure), short (they span less than window_s),
-- no_memory (idle is ruled out, small work cannot be told). Underused holders first, then by
-- card-hours.
-- param: run_id String = latest
-- param: limit UInt32 = 20
-- param: memory_pct Float64 = 25
-- param: activity_pct Float64 = 10
-- param: window_s Float64 = 1800
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
    ),
    used AS
    (
        SELECT
            concat(ifNull(namespace, 'default'), '/', pod)                  AS key,
            count()                                                         AS samples,
            dateDiff('second', min(ts), max(ts))                            AS sampled_s,
            max(memory_used_mib / nullIf(memory_total_mib, 0)) * 100        AS peak_memory_pct,
            avg(coalesce(engine_active * 100, utilization_pct))             AS mean_activity_pct,
            max(coalesce(engine_active * 100, utilization_pct))             AS peak_activity_pct
        FROM gpu_samples FINAL
        WHERE run_id = {run_id:String} AND pod IS NOT NULL
        GROUP BY key
    )
SELECT
    p.namespace                                                              AS namespace,
    p.pod                                                                    AS pod,
    p.cards                                                                  AS cards,
    round(p.cards * dateDiff('second', p.bound, if(p.was_removed, p.gone, run_end)) / 3600, 2)
                                                                             AS card_hours,
    u.samples                                                                AS samples,
    round(u.peak_memory_pct, 1)                                              AS peak_memory_pct,
    round(u.mean_activity_pct, 1)                                            AS mean_activity_pct,
    round(u.peak_activity_pct, 1)                                            AS peak_activity_pct,
    multiIf(
        u.samples IS NULL, 'no_samples',
        u.peak_activity_pct IS NULL, 'no_activity',
        u.sampled_s < {window_s:Float64}, 'short',
        u.peak_activity_pct < 1, 'idle',
        u.peak_memory_pct IS NULL, 'no_memory',
        u.peak_memory_pct < {memory_pct:Float64}
            AND u.peak_activity_pct < {activity_pct:Float64}, 'small_work',
        'busy'
    )                                                                        AS verdict
FROM per_pod AS p
LEFT JOIN used AS u ON u.key = p.pod
WHERE p.was_bound AND p.milli = 1000
ORDER BY verdict IN ('idle', 'small_work') DESC, card_hours DESC, pod
LIMIT {limit:UInt32}
SETTINGS join_use_nulls = 1
