"""The check `gpufrag worker` makes of its app id's stored state before Faust starts: read what
the broker holds, judge it (``streams.distributed.state_schema``), record the version."""

from __future__ import annotations

import logging
from dataclasses import replace

from connectors.kafka.compacted import ever_written, latest_values, put_value
from models.kafka_settings import KafkaSettings
from streams.distributed import topics
from streams.distributed.state_schema import (
    SCHEMA_KEY,
    STATE_SCHEMA,
    StateSchemaError,
    StoredState,
    needs_cluster_keys,
    verdict,
)

log = logging.getLogger(__name__)


async def check_state_schema(kafka: KafkaSettings, app_id: str) -> str:
    """What was found (for the log); raises ``StateSchemaError`` with the one line to show."""
    spec = topics.state_schema(app_id)
    schema = _version((await latest_values(kafka, spec.name)).get(SCHEMA_KEY), app_id)
    # with this version recorded, whether the changelogs were written decides nothing
    written = schema == STATE_SCHEMA or await ever_written(
        kafka, [t.name for t in topics.changelogs(app_id)]
    )
    found = StoredState(schema=schema, written=written)
    if needs_cluster_keys(found):
        keys = await latest_values(kafka, topics.changelog(app_id, "cluster"), keep_values=False)
        found = replace(found, cluster_keys=frozenset(k.decode("utf-8", "replace") for k in keys))
    judged = verdict(found, app_id=app_id)
    if judged.record:
        await put_value(kafka, spec.name, SCHEMA_KEY, str(STATE_SCHEMA).encode())
    log.info("app id %s: %s", app_id, judged.why)
    return judged.why


def _version(raw: bytes | None, app_id: str) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise StateSchemaError(
            f"app id {app_id!r}: its state schema record {raw[:40]!r} is not a version number"
        ) from None
