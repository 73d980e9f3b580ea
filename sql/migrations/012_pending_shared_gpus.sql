-- What a pending pod asks of shared cards, besides whole cards and milli-GPU shares: MIG
-- instances by profile, and HAMi's memory cap and core share per card. Empty map / NULL: none.
ALTER TABLE pending_explanations
    ADD COLUMN IF NOT EXISTS mig                Map(String, UInt16),
    ADD COLUMN IF NOT EXISTS gpu_memory_mib     Nullable(UInt32),
    ADD COLUMN IF NOT EXISTS gpu_cores_pct      Nullable(UInt8);
