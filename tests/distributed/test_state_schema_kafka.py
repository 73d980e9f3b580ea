"""The state check against a real broker: `gpufrag worker` on an app id whose cluster view was
saved by an older layout (no schedule) stops before Faust starts, with one line that names how
to rebuild, and records nothing; a complete older state is migrated (its version recorded); a
new app id gets this version; a newer one is refused."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from connectors.kafka.compacted import latest_values, put_value
from models.kafka_settings import KafkaSettings
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.worker_state import check_state_schema
from streams.distributed import topics
from streams.distributed.state_schema import SCHEMA_KEY, STATE_SCHEMA, StateSchemaError
from tests.distributed.worker_helpers import kafka_env

pytestmark = pytest.mark.kafka


def _kafka(bootstrap: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=bootstrap)


async def _older_state(kafka: KafkaSettings, prefix: str, app_id: str, keys: list[str]) -> None:
    """An app id as an older worker left it: its topics, and its cluster view's entries."""
    await Bus(kafka=kafka, prefix=prefix).ensure_topics(app_id=app_id)
    for key in keys:
        await put_value(kafka, topics.changelog(app_id, "cluster"), key.encode(), b"{}")


async def _recorded(kafka: KafkaSettings, app_id: str) -> bytes | None:
    return (await latest_values(kafka, topics.state_schema(app_id).name)).get(SCHEMA_KEY)


def test_a_view_saved_without_its_schedule_is_refused_in_one_line(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    kafka, app_id = _kafka(kafka_bootstrap), f"{topic_prefix}old"
    asyncio.run(_older_state(kafka, topic_prefix, app_id, ["n/node-1", "t/ml/a", "~released/0"]))
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "worker", "--prefix", topic_prefix,
         "--app-id", app_id],
        capture_output=True,
        text=True,
        timeout=300,
        env=kafka_env(kafka_bootstrap),
        check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr[-3000:]
    assert "without its schedule" in lines[0] and f"--app-id {app_id}-v{STATE_SCHEMA}" in lines[0]
    assert asyncio.run(_recorded(kafka, app_id)) is None  # refused: nothing recorded


def test_complete_older_new_and_newer_state(kafka_bootstrap: str, topic_prefix: str) -> None:
    kafka = _kafka(kafka_bootstrap)

    async def scenario() -> None:
        older = f"{topic_prefix}older"
        await _older_state(kafka, topic_prefix, older, ["n/node-1", "~released/0", "clock"])
        migrated = await check_state_schema(kafka, older)
        assert migrated == f"state schema 1 migrated to {STATE_SCHEMA}"
        assert await _recorded(kafka, older) == str(STATE_SCHEMA).encode()
        assert await check_state_schema(kafka, older) == f"state schema {STATE_SCHEMA}"

        new = f"{topic_prefix}new"
        await Bus(kafka=kafka, prefix=topic_prefix).ensure_topics(app_id=new)
        assert await check_state_schema(kafka, new) == "a new app id"
        assert await _recorded(kafka, new) == str(STATE_SCHEMA).encode()

        await put_value(kafka, topics.state_schema(new).name, SCHEMA_KEY, b"99")
        with pytest.raises(StateSchemaError, match="newer gpufrag"):
            await check_state_schema(kafka, new)

    asyncio.run(scenario())
