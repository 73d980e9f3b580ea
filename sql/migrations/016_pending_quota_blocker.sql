-- The quota object that holds a pending pod, when one does (reasons then name `quota` on every
-- node): its kind and name as gpufrag keys it (`VolcanoQueue:serve`, `ClusterQueue:team-a`,
-- `ResourceQuota:ml/gpu`, the scope id of its quota signals), and its figures for the first
-- resource the pod asks more of than it has room for, in that resource's units (GPUs for
-- nvidia.com/gpu): what the pod asks, what the object uses, its guaranteed share (Kueue
-- nominalQuota, Volcano deserved, ResourceQuota hard), its ceiling with borrowing (Volcano
-- capability, Kueue nominal + borrowingLimit; NULL: none of its own, only its cohort's free
-- share) and the room it has left. All NULL: no quota holds the pod.
ALTER TABLE pending_explanations
    ADD COLUMN IF NOT EXISTS quota_blocker    Nullable(String),
    ADD COLUMN IF NOT EXISTS quota_resource   Nullable(String),
    ADD COLUMN IF NOT EXISTS quota_requested  Nullable(Float64),
    ADD COLUMN IF NOT EXISTS quota_used       Nullable(Float64),
    ADD COLUMN IF NOT EXISTS quota_nominal    Nullable(Float64),
    ADD COLUMN IF NOT EXISTS quota_limit      Nullable(Float64),
    ADD COLUMN IF NOT EXISTS quota_room       Nullable(Float64);
