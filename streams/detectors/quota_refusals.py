"""The ResourceQuota refusals the quota detector keeps: owners (Jobs, ReplicaSets, ...) whose
GPU pods a namespace quota refused, with the figures of their latest refusal.

A refused pod never exists, so the view holds nothing of it; the controller's FailedCreate
Event is all there is, and it repeats while the owner stays blocked. A refusal is over when:

- no further refusal of the owner came for ``refusal_quiet_s`` of event time (20 minutes by
  default: a blocked owner is refused again sooner, see ``QuotaSettings``): it got its pods,
  or was deleted or scaled down;
- the watched ResourceQuota's hard limit now admits what was refused (for every refused
  resource, a GPU one, ``used + requested <= hard`` with the figures of the refusal): someone
  raised the quota, and the controller's next try will pass. Not on usage going down: a Job's
  finished pod frees quota that its next pod takes at once, and the owner is refused again;
  calling that resolved would reopen the signal once per finished pod;
- the ResourceQuota is deleted, or stops limiting GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from models import QueueObject, SchedulerEvent
from models.quota_refusal import QuotaRefusal

EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class RefusedOwner:
    """One owner's refusals by one quota."""

    namespace: str
    owner: str
    """``Kind namespace/name`` (``Job ml/train``)."""
    quota_key: str
    """``ResourceQuota:namespace/name``, the quota object's key in the view."""
    refusal: QuotaRefusal
    """The latest refusal's figures."""
    first_at: datetime
    last_at: datetime
    count: int

    @property
    def gpu_only(self) -> bool:
        return set(self.refusal.gpu_resources) == set(self.refusal.requested)

    def admitted_by(self, quota: QueueObject) -> bool:
        """Whether the quota's hard limit now admits the refused request. Only a refusal of GPU
        resources alone can tell: the view keeps a quota's GPU amounts only."""
        if not self.gpu_only:
            return False
        r = self.refusal
        for name, asked in r.requested.items():
            hard = quota.limit.get(name.removeprefix("requests."))
            if hard is None or r.used.get(name, 0.0) + asked > hard + EPSILON:
                return False
        return True

    def words(self) -> str:
        """``1 nvidia.com/gpu asked, 2 of 2 used`` per refused GPU resource."""
        r = self.refusal
        return "; ".join(
            f"{r.requested[n]:g} {n.removeprefix('requests.')} asked, "
            f"{r.used.get(n, 0.0):g} of {r.limited[n]:g} used"
            for n in r.gpu_resources
        )

    def evidence(self) -> dict[str, object]:
        r = self.refusal
        return {
            "quota": self.quota_key,
            "pod": r.pod,
            "requested": dict(r.requested),
            "used": dict(r.used),
            "limited": dict(r.limited),
            "gpu_resources": list(r.gpu_resources),
            "first_refused_at": self.first_at.isoformat(),
            "last_refused_at": self.last_at.isoformat(),
            "refusals": self.count,
        }

    def to_json(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "owner": self.owner,
            "quota_key": self.quota_key,
            "refusal": self.refusal.model_dump(mode="json"),
            "first_at": self.first_at.isoformat(),
            "last_at": self.last_at.isoformat(),
            "count": self.count,
        }

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> RefusedOwner:
        return cls(
            namespace=str(raw["namespace"]),
            owner=str(raw["owner"]),
            quota_key=str(raw["quota_key"]),
            refusal=QuotaRefusal.model_validate(raw["refusal"]),
            first_at=datetime.fromisoformat(str(raw["first_at"])),
            last_at=datetime.fromisoformat(str(raw["last_at"])),
            count=int(str(raw["count"])),
        )


class Refusals:
    """The live refusals by (quota key, owner), and when the next one falls quiet."""

    def __init__(self, *, quiet_s: float) -> None:
        self.quiet = timedelta(seconds=quiet_s)
        self.by_owner: dict[tuple[str, str], RefusedOwner] = {}

    def heard(self, event: SchedulerEvent, at: datetime) -> bool:
        """Keep a refusal of GPU resources; False for one that names none (a CPU or object
        count quota says nothing about GPUs) or has no quota read."""
        r = event.quota
        if r is None or not r.gpu_resources:
            return False
        namespace = event.object_namespace or "default"
        owner = event.owner or f"a controller in {namespace}"
        key = (f"ResourceQuota:{namespace}/{r.quota}", owner)
        prev = self.by_owner.get(key)
        if prev is None:
            self.by_owner[key] = RefusedOwner(namespace, owner, key[0], r, at, at, event.count)
        else:  # a late repeat keeps the latest time; its figures are the newest word
            last = max(prev.last_at, at)
            self.by_owner[key] = replace(
                prev, refusal=r, last_at=last, count=prev.count + event.count
            )
        return True

    def quota_gone(self, quota_key: str) -> bool:
        """Forget the refusals of a quota that is gone; True when there were some."""
        gone = [k for k in self.by_owner if k[0] == quota_key]
        for k in gone:
            del self.by_owner[k]
        return bool(gone)

    def live(self, now: datetime, quotas: dict[str, QueueObject]) -> list[RefusedOwner]:
        """Drop the refusals that are over at ``now``; the rest, oldest first."""
        for k, r in list(self.by_owner.items()):
            quota = quotas.get(r.quota_key)
            if now >= r.last_at + self.quiet or (quota is not None and r.admitted_by(quota)):
                del self.by_owner[k]
        return sorted(self.by_owner.values(), key=lambda r: (r.first_at, r.quota_key, r.owner))

    def next_due(self) -> datetime | None:
        return min((r.last_at + self.quiet for r in self.by_owner.values()), default=None)

    def due(self, at: datetime) -> bool:
        due = self.next_due()
        return due is not None and at >= due

    def state(self) -> list[dict[str, object]]:
        return [self.by_owner[k].to_json() for k in sorted(self.by_owner)]

    def restore(self, raw: object) -> None:
        self.by_owner = {}
        for item in raw if isinstance(raw, list) else []:
            r = RefusedOwner.from_json(item)
            self.by_owner[(r.quota_key, r.owner)] = r
