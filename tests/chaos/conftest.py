"""The chaos soak runs when asked (``GPUFRAG_SOAK=1``, as `.ci/run` and
``deploy/local/soak.sh`` set it). It starts a broker and a kube-apiserver of its own, four
Faust workers, the sink, the alerter, Alertmanager and two actuators: minutes of both cores,
too much for a quick ``pytest -m kafka`` on a laptop."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("GPUFRAG_SOAK") == "1" else ["test_soak.py"]
