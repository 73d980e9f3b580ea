"""A toy detector, as a plugin would ship one: a node whose every GPU is allocated.

Nothing in the product names it; the last line registers it, and importing this module (in a
test, or through ``GPUFRAG_PLUGINS`` in a `gpufrag` process) is all it takes to run it."""

from __future__ import annotations

from models import Scope, Severity, Signal
from streams.detectors.detector import Detector, ExtensionSwitch
from streams.detectors.detector_registry import DETECTORS

KIND = "toy_full_node"


class FullNode(Detector[ExtensionSwitch]):
    name = KIND

    def on_node(self, name: str) -> list[Signal]:
        ix = self.view.index
        i = ix.slot.get(name)
        if i is None or int(ix.gpu_cards[i]) == 0 or int(ix.node_idle[i]) > 0:
            return self.book.resolved(KIND, Scope.NODE, name)
        return self.book.opened(
            KIND,
            Scope.NODE,
            name,
            severity=Severity.INFO,
            summary=f"{name}: every GPU allocated",
            evidence={"gpus": int(ix.gpu_cards[i])},
        )


DETECTORS.register(FullNode.name, FullNode)
