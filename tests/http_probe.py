"""Reading a command's probe endpoint over real HTTP, as the kubelet and Prometheus do."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request


def get(port: int, path: str) -> tuple[int, str]:
    """Status and body of GET ``path``; OSError while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_ready(port: int, *, deadline_s: float, alive: object = None) -> dict[str, object]:
    """Poll /readyz until it answers 200; its JSON. ``alive``: a Popen whose exit ends the
    wait early (a command that died will never be ready)."""
    deadline = time.monotonic() + deadline_s
    last: object = None
    while time.monotonic() < deadline:
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"the command exited before it was ready (last {last})")
        try:
            status, body = get(port, "/readyz")
        except OSError as exc:
            last = exc
        else:
            last = (status, body)
            if status == 200:
                answer = json.loads(body)
                assert isinstance(answer, dict)
                return answer
        time.sleep(0.2)
    raise AssertionError(f"/readyz not 200 within {deadline_s} s: last {last}")
