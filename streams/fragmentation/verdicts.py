"""gpufrag's explanation of a pending pod set beside kube-scheduler's own verdict on it.

The two count nodes differently: the scheduler files each node under its first failing filter
(node unschedulable, taints, affinity, then resources), gpufrag under every reason the node has.
So each reason the scheduler gives should be among gpufrag's, and the check runs that way:

- reasons are compared in gpufrag's words (``SchedulerVerdict.blocking``), and the GPU ones as
  one family: the scheduler sees only resource names (``Insufficient nvidia.com/gpu``), where
  gpufrag tells too few cards from a share split across cards, too little card memory (HAMi)
  or no instance of the MIG profile, so any of those four agrees with any other;
- reasons gpufrag does not model (node affinity or selector, volumes, ports, unbound claims,
  another scheduler's wording) are not compared at all: they can neither agree nor disagree,
  and a verdict naming only such reasons is not judged (``agrees`` None);
- gpufrag finding a node that fits while the scheduler found none is a disagreement, unless
  the scheduler also named a reason gpufrag does not model, which may be what rules that node
  out.

A disagreement is named by the scheduler's reason with the most nodes that gpufrag lacks (its
main reason when gpufrag finds a fitting node): a handful of names, fit for a metric label.

The verdict is the scheduler's view when it wrote it, gpufrag's the view at its evaluation, up
to ``evaluate_every_s`` later; both times are kept so a reader can tell a stale verdict from a
model that differs. In a timeline replay of 4 nodes compressed 2,000x (the simulated scheduler
writing kube-scheduler's messages), 29 of the 378 verdicts compared disagreed, each a CPU or
memory shortage the scheduler saw 2-30 s before gpufrag's evaluation and gone by then.
"""

from __future__ import annotations

from models.analysis import BlockReason, Explanation, SchedulerCheck
from models.scheduler import PendingVerdict

__all__ = ["GPU_FAMILY", "check_verdict"]

GPU_FAMILY = frozenset(
    {BlockReason.GPU_COUNT, BlockReason.GPU_SHARE, BlockReason.GPU_MEMORY, BlockReason.MIG_PROFILE}
)
_ORDER = {r: i for i, r in enumerate(BlockReason)}
"""Ties between equal node counts go by gpufrag's order of reasons, so the label is stable."""


def _family(reason: BlockReason) -> str:
    return "gpu" if reason in GPU_FAMILY else reason.value


def _words(verdict: PendingVerdict) -> tuple[list[tuple[BlockReason, int]], bool]:
    """The scheduler's reasons that gpufrag models, most nodes first, and whether it gave
    others too (or a message it could not read)."""
    known = {r.value: r for r in BlockReason}
    modelled = [(known[k], n) for k, n in verdict.reasons.items() if k in known]
    modelled.sort(key=lambda rn: (-rn[1], _ORDER[rn[0]]))
    others = verdict.message is not None or len(modelled) < len(verdict.reasons)
    return modelled, others


def check_verdict(exp: Explanation, verdict: PendingVerdict) -> SchedulerCheck:
    """Whether the scheduler's verdict and gpufrag's explanation of one pending pod agree."""
    modelled, others = _words(verdict)
    if not modelled:
        return SchedulerCheck(verdict=verdict, agrees=None, reason=None)
    of = f" of {verdict.nodes}" if verdict.nodes is not None else ""
    if exp.fits_some_node:
        main, n = modelled[0]
        if others:
            return SchedulerCheck(verdict=verdict, agrees=None, reason=main)
        return SchedulerCheck(
            verdict=verdict,
            agrees=False,
            reason=main,
            disagreement=(
                f"gpufrag finds a node that fits; the scheduler found none ({main.value} on "
                f"{n}{of} nodes)"
            ),
        )
    ours = {_family(r) for r, _ in exp.blocking}
    missing = [(r, n) for r, n in modelled if _family(r) not in ours]
    if not missing:
        return SchedulerCheck(verdict=verdict, agrees=True, reason=modelled[0][0])
    seen = ", ".join(r.value for r, _ in exp.blocking) or "none"
    lacked = ", ".join(f"{r.value} on {n}{of} nodes" for r, n in missing)
    return SchedulerCheck(
        verdict=verdict,
        agrees=False,
        reason=missing[0][0],
        disagreement=f"the scheduler says {lacked}; gpufrag's reasons: {seen}",
    )
