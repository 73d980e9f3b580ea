"""NVIDIA XID codes with their meaning and what they say about the card (issue 13, part 4).

An XID is the driver's report of a GPU error. Some mean the card must not take new work until it
is reset (or replaced); some mean one application misbehaved and the card is fine; the rest are
informational. The meanings follow NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors);
a code not listed here is kept, and labelled unknown rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["XID_TABLE", "XidClass", "XidInfo", "classify_xid"]


class XidClass(StrEnum):
    FATAL = "fatal"
    """The card needs a reset (or service) before it takes new work."""
    APPLICATION = "application"
    """One application's fault; the card goes on serving others."""
    INFORMATIONAL = "informational"
    UNKNOWN = "unknown"
    """Not in gpufrag's table: kept and shown as it is, not taken as healthy or broken."""


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    meaning: str
    kind: XidClass

    @property
    def takes_card_out(self) -> bool:
        return self.kind is XidClass.FATAL


_F, _A, _I = XidClass.FATAL, XidClass.APPLICATION, XidClass.INFORMATIONAL
XID_TABLE: dict[int, XidInfo] = {
    i.code: i
    for i in (
        XidInfo(13, "graphics engine exception", _A),
        XidInfo(31, "GPU memory page fault", _A),
        XidInfo(32, "invalid or corrupted push buffer stream", _A),
        XidInfo(43, "GPU stopped processing", _A),
        XidInfo(45, "preemptive cleanup, due to previous errors", _A),
        XidInfo(48, "double bit ECC error", _F),
        XidInfo(61, "internal micro-controller breakpoint/warning", _F),
        XidInfo(62, "internal micro-controller halt", _F),
        XidInfo(63, "ECC page retirement or row remapping recorded (applies at reset)", _I),
        XidInfo(64, "ECC page retirement or row remapping failure", _F),
        XidInfo(68, "video processor exception", _A),
        XidInfo(69, "graphics engine class error", _A),
        XidInfo(74, "NVLink error", _F),
        XidInfo(79, "GPU has fallen off the bus", _F),
        XidInfo(92, "high single-bit ECC error rate", _I),
        XidInfo(94, "contained ECC error", _F),
        XidInfo(95, "uncontained ECC error", _F),
        XidInfo(109, "context switch timeout", _A),
        XidInfo(119, "GSP RPC timeout", _F),
        XidInfo(120, "GSP error", _F),
        XidInfo(121, "C2C link corrected error", _I),
        XidInfo(140, "unrecovered ECC error", _F),
        XidInfo(154, "GPU recovery action changed (reset or reboot required)", _F),
    )
}


def classify_xid(code: int) -> XidInfo:
    """The code's entry, or an ``unknown`` one that keeps the code."""
    return XID_TABLE.get(code) or XidInfo(code, "not in gpufrag's XID table", XidClass.UNKNOWN)
