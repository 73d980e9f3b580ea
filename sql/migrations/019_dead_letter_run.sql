-- The run a dead letter belongs to: the refused row's own, else the run of the process that
-- kept it (a replay, `watch --bus embedded`, `gpufrag sink --run-id`). Empty for letters kept
-- before this column existed.
ALTER TABLE dead_letter
    ADD COLUMN IF NOT EXISTS run_id String DEFAULT '';
