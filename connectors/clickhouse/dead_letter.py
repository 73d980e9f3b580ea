"""Dead letters, and the test for whether a failed insert is the store's fault or the rows'.

Both decide where a row that will not insert ends up, so they live apart from the sink's
buffering: a row is only dead-lettered when the error is not one the store raises for its
own state, since misfiling good rows during an outage would lose them from their table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime

import orjson

__all__ = ["DEAD_LETTER_TABLE", "dead_letter_row", "is_store_side_error"]

DEAD_LETTER_TABLE = "dead_letter"


def _row_json(row: Mapping[str, object]) -> str:
    return orjson.dumps(
        dict(row), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr
    ).decode()


# Errors about the store's state, never about the rows: the probe's query may well succeed
# while these last, and splitting or dead-lettering would misfile good rows. ClickHouse names
# the error in parentheses at the end of its message. "Too many parts" (merges lagging) is
# matched by text: the same code also covers "Too many partitions for single INSERT block",
# which is the batch's fault and is cured by splitting it.
_STORE_SIDE_ERRORS = (
    "(READONLY)",
    "(TABLE_IS_READ_ONLY)",
    "(NOT_ENOUGH_SPACE)",
    "(TOO_MANY_SIMULTANEOUS_QUERIES)",
    "(TIMEOUT_EXCEEDED)",
    "(SOCKET_TIMEOUT)",
    "(NETWORK_ERROR)",
    "(ALL_CONNECTION_TRIES_FAILED)",
    "(UNKNOWN_SETTING)",  # a server without keep_free_mib's setting: never the rows' fault
    "Too many parts (",
)


def is_store_side_error(message: str) -> bool:
    """True for errors that say the store cannot take writes now, whatever the rows."""
    return any(marker in message for marker in _STORE_SIDE_ERRORS)


def dead_letter_row(
    table: str, row: Mapping[str, object], reason: str, *, run_id: str = ""
) -> dict[str, object]:
    """The ``dead_letter`` row for ``row`` of ``table``: its id depends only on the table and
    the row, so writing the same dead letter twice leaves one row. Filed under the row's own
    run, else ``run_id`` (the writer's)."""
    text = _row_json(row)
    digest = hashlib.sha1(f"{table}\x1f{text}".encode(), usedforsecurity=False).hexdigest()
    return {
        "id": digest,
        "ts": datetime.now(UTC),
        "target": table,
        "reason": reason,
        "row": text,
        "run_id": str(row.get("run_id") or run_id),
    }
