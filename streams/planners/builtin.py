"""The product's own planners: importing this module registers them, the same way importing a
plugin registers its planners (one ``register_planner`` line in each module)."""

from streams.planners import aggressor, consolidate, quarantine, quota_reclaim, reclaim

__all__ = ["aggressor", "consolidate", "quarantine", "quota_reclaim", "reclaim"]
