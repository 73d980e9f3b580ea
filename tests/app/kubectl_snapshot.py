"""The saved `kubectl get nodes,pods -A -o json` the inspect tests read, and edited copies."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FIXTURE", "edited"]

FIXTURE = Path(__file__).parent / "fixtures" / "kubectl_shared_gpus.json"


def edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The fixture with ``edit`` applied to its parsed body, written to tmp_path."""
    body = json.loads(FIXTURE.read_text())
    edit(body)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(body))
    return path
