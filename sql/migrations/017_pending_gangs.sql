-- A gang waiting for room (a Volcano PodGroup or a Kueue pod group with fewer members bound than
-- its minMember) is one row, `pod` = namespace/gang:NAME: the gang's name, its minMember, the
-- members already bound to a node, its pending members' keys, and of the members still needed
-- (minMember less those bound) how many fit together, largest first. fits_some_node then says
-- all the needed members fit together. The request columns, reasons and near_misses are those
-- of one member, gang_member_shown, checked alone: the first member that found no room, or,
-- when all fit together, the largest. NULL / empty array: a single pod's row.
ALTER TABLE pending_explanations
    ADD COLUMN IF NOT EXISTS gang                     Nullable(String),
    ADD COLUMN IF NOT EXISTS gang_min_member          Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS gang_bound               Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS gang_members             Array(String),
    ADD COLUMN IF NOT EXISTS gang_placeable_together  Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS gang_needed              Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS gang_member_shown        Nullable(String);
