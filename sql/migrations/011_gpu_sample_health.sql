-- GPU health and MIG identity from dcgm-exporter: the instance a sample is about, windowed XID
-- counts and HBM row remapping. NULL stays "not reported", never zero. A Map cannot be
-- Nullable, so an empty xid_counts reads "none fired, or not counted by the source"; the raw
-- event in `events` keeps the difference.
ALTER TABLE gpu_samples
    ADD COLUMN IF NOT EXISTS mig_profile                  LowCardinality(Nullable(String)),
    ADD COLUMN IF NOT EXISTS mig_instance                 Nullable(UInt16),
    ADD COLUMN IF NOT EXISTS xid_counts                   Map(UInt32, UInt32),
    ADD COLUMN IF NOT EXISTS xid_window_ms                Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS rows_remapped_correctable    Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS rows_remapped_uncorrectable  Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS row_remap_pending            Nullable(UInt8),
    ADD COLUMN IF NOT EXISTS row_remap_failed             Nullable(UInt8);
