-- kube-scheduler's own verdict on a pending pod (its latest FailedScheduling event), stored
-- beside gpufrag's reasons: when it said so, over how many nodes, its reasons in gpufrag's
-- words where they have one (else its own text), the message when it could not be read, and
-- whether the two agree (NULL: nothing to compare) with the difference in words.
-- NULL / empty map: the scheduler gave no verdict while the pod waited.
ALTER TABLE pending_explanations
    ADD COLUMN IF NOT EXISTS scheduler_at        Nullable(DateTime64(3, 'UTC')),
    ADD COLUMN IF NOT EXISTS scheduler_nodes     Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS scheduler_reasons   Map(String, UInt32),
    ADD COLUMN IF NOT EXISTS scheduler_message   Nullable(String),
    ADD COLUMN IF NOT EXISTS agrees              Nullable(UInt8),
    ADD COLUMN IF NOT EXISTS disagreement        String;
