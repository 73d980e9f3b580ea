-- Every signal as it opened and resolved, in event time.
-- param: run_id String = latest
-- param: limit UInt32 = 500
SELECT ts, state, kind, scope, scope_id, severity, summary
FROM signals FINAL
WHERE run_id = {run_id:String}
ORDER BY ts, kind, scope_id, state DESC
LIMIT {limit:UInt32}
