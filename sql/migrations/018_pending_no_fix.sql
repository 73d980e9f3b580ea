-- Why no planner found a fix for an unplaceable pending pod, on its explanation row of the
-- instant it was planned for (its unplaceable_pending signal opening): a JSON list, one object
-- per planner that searched, {planner, code, guardrail, text, pods, nodes}, `code` naming the
-- guardrail (protected_namespace, priority_gap, ...) or the shortage (max_victims, ...).
-- NULL: nothing was planned at that row (a later evaluation, actions off, or a plan was made,
-- stored in `actions`).
ALTER TABLE pending_explanations
    ADD COLUMN IF NOT EXISTS no_fix Nullable(String);
