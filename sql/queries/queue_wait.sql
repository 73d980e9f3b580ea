-- Time from creation to binding per queue (the trace's QoS class when no queue is set).
-- param: run_id String = latest
SELECT
    queue,
    count()                                  AS pods,
    round(quantileExact(0.5)(first_wait_s), 1)     AS wait_p50_s,
    round(quantileExact(0.95)(first_wait_s), 1)    AS wait_p95_s,
    round(max(first_wait_s), 1)                    AS wait_max_s
FROM
(
    SELECT pod, ifNull(any(queue), '(none)') AS queue, min(wait_s) AS first_wait_s
    FROM task_profiles FINAL
    WHERE run_id = {run_id:String} AND wait_s IS NOT NULL
    GROUP BY pod
)
GROUP BY queue
ORDER BY wait_p95_s DESC, queue
