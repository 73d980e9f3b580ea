"""Timing a command in a fresh process, with the peak memory of that process alone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from streams.app.bench.runner import BenchError

ERROR_TAIL_CHARS = 2_000
PEAK_FILE = "{peak_file}"
"""Stands in ``module_with_peak``'s arguments for the file the child writes its peak to: an
argument, since an unknown GPUFRAG_* variable is refused by the settings."""

# The child runs the module under runpy and, on its way out, writes its VmHWM: the peak RSS of
# its own address space. wait4's ru_maxrss is no use here: Linux carries the parent's high-water
# mark over fork and exec, so every child of this (large) process read 574 MiB, whatever it did.
_WITH_PEAK = """
import atexit, runpy, sys
def _peak():
    with open('/proc/self/status') as f:
        kib = next(line.split()[1] for line in f if line.startswith('VmHWM:'))
    with open(peak_file, 'w') as f:
        f.write(kib)
peak_file = sys.argv[1]
atexit.register(_peak)
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)
"""


@dataclass(frozen=True, slots=True)
class ProcessRun:
    wall_s: float
    peak_mib: float | None
    """The child's own peak resident set (None unless asked for)."""
    stdout: bytes


def gpufrag(*args: str) -> list[str]:
    """`gpufrag ARGS` as this interpreter runs it (the entry point may not be on PATH)."""
    return [sys.executable, "-m", "streams.app", *args]


def module_with_peak(module: str, *args: str) -> list[str]:
    """``python -m MODULE ARGS`` that also reports its peak RSS (see ``run_fresh``)."""
    return [sys.executable, "-c", _WITH_PEAK, PEAK_FILE, module, *args]


def run_fresh(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> ProcessRun:
    """Run ``argv`` to its end; a non-zero exit is a BenchError with the end of its stderr.
    For an ``argv`` of ``module_with_peak`` the run has the child's peak RSS."""
    with tempfile.TemporaryDirectory(prefix="gpufrag-bench-run-") as tmp:
        peak_file = Path(tmp) / "peak"
        argv = [str(peak_file) if a == PEAK_FILE else a for a in argv]
        with (Path(tmp) / "out").open("w+b") as out, (Path(tmp) / "err").open("w+b") as err:
            start = time.perf_counter()
            proc = subprocess.run(
                list(argv),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=dict(env or os.environ),
                check=False,
            )
            wall = time.perf_counter() - start
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if proc.returncode != 0:
            tail = stderr.decode(errors="replace")[-ERROR_TAIL_CHARS:]
            raise BenchError(f"{' '.join(argv[-3:])} exited with {proc.returncode}: {tail}")
        peak = int(peak_file.read_text()) / 1024 if peak_file.exists() else None
    return ProcessRun(wall_s=wall, peak_mib=peak, stdout=stdout)
