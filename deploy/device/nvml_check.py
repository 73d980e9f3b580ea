"""A short, prepared check of the NVML node sampler on a real GPU machine.

Takes one round of samples idle, one while a child process holds 20 GiB on GPU 0 (through
PyTorch, which such machines have), and one after it freed them; writes every sample as JSON
lines to OUT/samples.jsonl and prints what a reader needs to judge them.

Run from the repository root: ``python3 deploy/device/nvml_check.py OUT_DIR``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from connectors.gpu.sampler import NvmlSampler
from connectors.refusals import RefusalLog
from models import Envelope, to_json

HOLD = """
import sys, time, torch
x = torch.empty(20 * 2**30, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("allocated", flush=True)
sys.stdin.readline()
"""


async def one_round(label: str, out: list[dict[str, object]]) -> None:
    got: list[Envelope] = []

    async def emit(env: Envelope) -> None:
        got.append(env)

    refusals = RefusalLog()  # a card refused on the real GPU shows in the output below
    sampler = NvmlSampler(
        node="device", interval_s=1, on_no_gpu="exit", emit=emit, refusals=refusals
    )
    await sampler.run(stop=asyncio.Event(), max_rounds=1)
    if sampler.unavailable:
        print(f"{label}: {sampler.unavailable}")
    if refusals.last is not None:
        print(f"{label}: {refusals.total()} refused, last: {refusals.last.detail}")
    for env in got:
        row = json.loads(to_json(env))
        row["round"] = label
        out.append(row)
        s = row["payload"]["sample"]
        print(
            f"{label}: gpu {s['gpu_index']} {s['model']} {s['uuid']} "
            f"used {s['memory_used_mib']:.1f} / {s['memory_total_mib']:.1f} MiB "
            f"(reserved {s['memory_reserved_mib']}) util {s['utilization_pct']} % "
            f"xid {s['xid']} pod {s['pod']}"
        )


def main(out_dir: Path) -> int:
    rows: list[dict[str, object]] = []
    asyncio.run(one_round("idle", rows))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    line = child.stdout.readline().strip()
    print(f"child pid {child.pid}: {line or 'could not allocate (no torch or no GPU)'}")
    if line == "allocated":
        asyncio.run(one_round("holding_20GiB", rows))
        child.stdin.write("\n")
        child.stdin.flush()
    child.wait(60)
    time.sleep(1)
    asyncio.run(one_round("freed", rows))
    (out_dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
