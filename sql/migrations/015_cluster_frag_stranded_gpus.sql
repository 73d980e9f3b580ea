-- Idle GPU on the stranded nodes at each instant (part of idle_gpus), beside their count.
ALTER TABLE cluster_frag
    ADD COLUMN IF NOT EXISTS stranded_gpus Float64 DEFAULT 0;
