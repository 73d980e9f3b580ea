"""GPU telemetry sources: the NVML node sampler (and, later, the DCGM exporter scraper)."""
