-- A pod's GPU memory peak, one row each time it rose: made by its node's stage, which reads the
-- samples and the pod's binding in event-time order (before this table the pod's profile kept
-- the peak, and a Faust worker lost a short-lived pod's peak). ts and seq are the sample's place
-- in the order, as in task_profiles; the pod's peak is the last row's (or the max).
CREATE TABLE IF NOT EXISTS task_memory_peaks
(
    run_id     String,
    ts         DateTime64(3, 'UTC'),
    seq        UInt64,
    pod        String,                     -- namespace/name
    namespace  String,
    node       String,
    used_mib   Float64
)
ENGINE = ReplacingMergeTree
ORDER BY (run_id, pod, ts, seq);
