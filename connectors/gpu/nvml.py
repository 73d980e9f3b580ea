"""Reading GPUs through NVML (nvidia-ml-py), one call per value, each allowed to be missing.

Drivers and containers differ in what they expose (per-process memory, ECC, XID events are often
"Not Supported" in containers): a missing value becomes None, never a guess and never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from connectors.gpu.reading import NvmlReading, ProcessUse

T = TypeVar("T")


class NvmlUnavailable(RuntimeError):
    """No usable NVML here (no driver, no GPU): the reason in one line."""


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise NvmlUnavailable(f"nvidia-ml-py is not installed: {exc}") from exc
    return pynvml


class Nvml:
    """An initialised NVML session; ``close()`` shuts it down."""

    def __init__(self) -> None:
        self._lib = _pynvml()
        try:
            self._lib.nvmlInit()
        except self._lib.NVMLError as exc:
            raise NvmlUnavailable(f"no NVIDIA GPU can be read here: NVML says {exc}") from None
        self._events: Any = None
        self._handles = [
            self._lib.nvmlDeviceGetHandleByIndex(i) for i in range(self._lib.nvmlDeviceGetCount())
        ]
        self._register_xid_events()

    @property
    def driver_version(self) -> str | None:
        return self._maybe(self._lib.nvmlSystemGetDriverVersion)

    def __len__(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        lib = self._lib
        if self._events is not None:
            self._maybe(lib.nvmlEventSetFree, self._events)
        self._maybe(lib.nvmlShutdown)

    def _maybe(self, fn: Callable[..., T], *args: Any) -> T | None:
        try:
            return fn(*args)
        except self._lib.NVMLError:
            return None

    def _register_xid_events(self) -> None:
        lib = self._lib
        events = self._maybe(lib.nvmlEventSetCreate)
        if events is None:
            return
        registered = 0
        for h in self._handles:
            try:
                lib.nvmlDeviceRegisterEvents(h, lib.nvmlEventTypeXidCriticalError, events)
                registered += 1
            except lib.NVMLError:  # often not supported inside containers
                continue
        if registered:
            self._events = events
        else:
            self._maybe(lib.nvmlEventSetFree, events)

    def poll_xids(self) -> dict[str, int]:
        """XIDs raised since the last poll, by GPU UUID (the last one per card)."""
        lib = self._lib
        out: dict[str, int] = {}
        if self._events is None:
            return out
        while True:
            try:
                data = lib.nvmlEventSetWait(self._events, 0)
            except lib.NVMLError:  # timeout: nothing pending (or events unsupported)
                return out
            uuid = self._maybe(lib.nvmlDeviceGetUUID, data.device)
            if uuid is not None:
                out[str(uuid)] = int(data.eventData)

    def read(self, index: int, *, xid: int | None = None) -> NvmlReading:
        lib = self._lib
        h = self._handles[index]
        mem = self._maybe(lib.nvmlDeviceGetMemoryInfo, h, lib.nvmlMemory_v2)
        if mem is None:  # older drivers: v1 counts reserved memory as used
            mem = self._maybe(lib.nvmlDeviceGetMemoryInfo, h)
        util = self._maybe(lib.nvmlDeviceGetUtilizationRates, h)
        ecc = self._maybe(
            lib.nvmlDeviceGetTotalEccErrors,
            h,
            lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            lib.NVML_VOLATILE_ECC,
        )
        # (correctable rows, uncorrectable rows, remap pending, remap failed); Ampere and
        # later only, NVMLError (not supported) on older cards
        remap = self._maybe(lib.nvmlDeviceGetRemappedRows, h)
        mig = self._maybe(lib.nvmlDeviceGetMigMode, h)
        procs = self._maybe(lib.nvmlDeviceGetComputeRunningProcesses, h) or []
        return NvmlReading(
            index=index,
            uuid=_text(self._maybe(lib.nvmlDeviceGetUUID, h)),
            name=_text(self._maybe(lib.nvmlDeviceGetName, h)),
            memory_total_bytes=None if mem is None else int(mem.total),
            memory_used_bytes=None if mem is None else int(mem.used),
            memory_reserved_bytes=(
                int(mem.reserved) if mem is not None and hasattr(mem, "reserved") else None
            ),
            gpu_util_pct=None if util is None else float(util.gpu),
            memory_util_pct=None if util is None else float(util.memory),
            ecc_uncorrected_volatile=None if ecc is None else int(ecc),
            rows_remapped_correctable=None if remap is None else int(remap[0]),
            rows_remapped_uncorrectable=None if remap is None else int(remap[1]),
            row_remap_pending=None if remap is None else bool(remap[2]),
            row_remap_failed=None if remap is None else bool(remap[3]),
            mig_enabled=None if mig is None else bool(mig[0]),
            xid=xid,
            mig_uuids=self._mig_uuids(h) if mig is not None and mig[0] else (),
            processes=tuple(
                ProcessUse(
                    pid=int(p.pid),
                    used_bytes=_used(getattr(p, "usedGpuMemory", None)),
                )
                for p in procs
            ),
        )

    def _mig_uuids(self, h: Any) -> tuple[str, ...]:
        """The card's MIG devices' UUIDs (slots without a device are skipped)."""
        lib = self._lib
        out: list[str] = []
        for i in range(self._maybe(lib.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
            mig = self._maybe(lib.nvmlDeviceGetMigDeviceHandleByIndex, h, i)
            uuid = None if mig is None else _text(self._maybe(lib.nvmlDeviceGetUUID, mig))
            if uuid is not None:
                out.append(uuid)
        return tuple(out)


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _used(value: object) -> int | None:
    # NVML reports "not available" as a huge sentinel, or None through the bindings
    if not isinstance(value, int) or value < 0 or value >= 2**63:
        return None
    return value
