"""`gpufrag check-config`: which checks apply (``check_plan.py``), one check per target
(``targets.py``), running them at once under one bound (``run.py``)."""
