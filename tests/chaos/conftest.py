"""The chaos soak runs when asked (``GPUFRAG_SOAK=1``; ``deploy/local/soak.sh`` sets it), not
in `.ci/run` yet: it does not pass every time. After a rebalance a worker still refuses some
input as late (a stage partition releases before it has read again everything below its
release; the refusals are logged with the partition's marks, first offsets read and resume
offsets). docs/distributed.md#the-chaos-soak says what was found and fixed so far; the soak
joins CI once it passes, not by loosening it."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("GPUFRAG_SOAK") == "1" else ["test_soak.py"]
