-- Engine activity (the idle-card query reads it beside memory) and uncorrectable ECC errors
-- since the driver loaded (a rise takes a card out). NULL: the source does not report it.
ALTER TABLE gpu_samples
    ADD COLUMN IF NOT EXISTS engine_active             Nullable(Float64),
    ADD COLUMN IF NOT EXISTS ecc_uncorrected_volatile  Nullable(UInt32);
