"""The chaos soak runs when asked (``GPUFRAG_SOAK=1``; ``deploy/local/soak.sh`` sets it), not
in `.ci/run` yet: run alone it passed its last five seeds, and in a CI run beside the rest of
the suite it failed (a history short of the embedded runner's, cause not found:
docs/distributed.md#the-chaos-soak). It joins CI once it passes there, not by loosening it. It
starts a broker of its own, four Faust workers, the sink, the alerter and Alertmanager: minutes
of both cores."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("GPUFRAG_SOAK") == "1" else ["test_soak.py"]
