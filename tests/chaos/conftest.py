"""The chaos soak runs when asked (``GPUFRAG_SOAK=1``; ``deploy/local/soak.sh`` sets it), not
in `.ci/run` yet: it passed 8 of its last 9 runs, and the one failure (a history short of the
embedded runner's after a broker outage and two rebalances) is not explained for certain
(docs/distributed.md#the-chaos-soak). It joins CI once it passes, not by loosening it. It
starts a broker of its own, four Faust workers, the sink, the alerter and Alertmanager: minutes
of both cores."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("GPUFRAG_SOAK") == "1" else ["test_soak.py"]
