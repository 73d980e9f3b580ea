"""The chaos soak runs when asked (``GPUFRAG_SOAK=1``): `.ci/run` asks, and so does
``deploy/local/soak.sh``. A plain ``pytest`` leaves it out: it starts a broker of its own,
four Faust workers, the sink, the alerter and Alertmanager, which is minutes of both cores."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("GPUFRAG_SOAK") == "1" else ["test_soak.py"]
