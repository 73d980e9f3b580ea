"""The physical side of reading a trace CSV: capped sizes, per-line decoding, CSV records.

Everything a row is checked for later needs the row first, so this layer bounds what reading
one costs whatever the file holds: the file is read line by line with a byte cap per line and
for the whole file (a trace of /dev/zero or one 10 GB line ends at the cap instead of eating
memory), each line is decoded on its own, and a line that cannot be read becomes a problem of
its record only, so one bad line does not hide the rest of the file.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["Record", "TraceFormatError", "records"]

StrPath = str | os.PathLike[str]

_SKIP_CHUNK = 1 << 20


class TraceFormatError(ValueError):
    """Raised for any malformed trace input, so callers can point a user at the exact cell.

    ``code`` is short and stable (it labels the refusal metric); ``line`` is None only for
    what concerns the file as a whole (its size)."""

    def __init__(
        self,
        file: str,
        line: int | None,
        column: str | None,
        reason: str,
        code: str = "malformed",
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.reason = reason
        self.code = code
        where = f"{file}:" if line is None else f"{file}:{line}:"
        super().__init__(
            f"{where} {reason}" if column is None else f"{where} column {column!r}: {reason}"
        )

    def __reduce__(
        self,
    ) -> tuple[type[TraceFormatError], tuple[str, int | None, str | None, str, str]]:
        # The default would call cls(message) and fail; keep the error picklable for workers.
        return (type(self), (self.file, self.line, self.column, self.reason, self.code))


@dataclass(frozen=True, slots=True)
class Record:
    """One CSV record: the line it starts on, its text as read, and its fields, or the
    problem that kept it from being read (the caller decides to raise it or refuse the row)."""

    line: int
    raw: str
    fields: list[str] | TraceFormatError


class _BadLine(Exception):
    """Raised through csv.reader by the line feed; csv.reader passes it on and resets."""

    def __init__(self, code: str, reason: str, raw: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.raw = raw


class _Lines:
    """Feeds csv.reader one decoded physical line at a time, keeping the current record's
    lines so a refused record can be kept as it was read."""

    def __init__(
        self, fh: BinaryIO, file: str, *, max_file_bytes: int, max_line_bytes: int
    ) -> None:
        self.fh = fh
        self.file = file
        self.max_file_bytes = max_file_bytes
        self.max_line_bytes = max_line_bytes
        self.read_bytes = 0
        self.number = 0
        self.raw: list[str] = []

    def __iter__(self) -> _Lines:
        return self

    def _read(self, limit: int) -> bytes:
        data = self.fh.readline(limit)
        self.read_bytes += len(data)
        # A file that grows while read, or a device with no size, still ends at the cap.
        if self.read_bytes > self.max_file_bytes:
            raise TraceFormatError(
                self.file,
                None,
                None,
                f"more than {self.max_file_bytes} bytes (GPUFRAG_TRACE__MAX_FILE_BYTES)",
                "file_too_large",
            )
        return data

    def __next__(self) -> str:
        data = self._read(self.max_line_bytes + 1)
        if not data:
            raise StopIteration
        self.number += 1
        if len(data) > self.max_line_bytes and not data.endswith(b"\n"):
            quotes = sum(r.count('"') for r in self.raw) + data.count(b'"')
            rest = data
            while rest and not rest.endswith(b"\n"):
                rest = self._read(_SKIP_CHUNK)
                quotes += rest.count(b'"')
            # A quote left open carries the record on to the next lines: skip them too, so
            # the refused record is one refusal and its tail is not read as records of its own
            # (quotes inside a field are doubled, so the count's parity says open or closed).
            while quotes % 2 and (rest := self._read(_SKIP_CHUNK)):
                quotes += rest.count(b'"')
                self.number += rest.endswith(b"\n")
            raw = data[: self.max_line_bytes].decode("utf-8", "replace")
            self.raw.append(raw)
            raise _BadLine(
                "line_too_long",
                f"line longer than {self.max_line_bytes} bytes (GPUFRAG_TRACE__MAX_LINE_BYTES)",
                "".join(self.raw),
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.raw.append(data.decode("utf-8", "replace"))
            raise _BadLine(
                "not_utf8", f"not valid UTF-8: {exc.reason}", "".join(self.raw)
            ) from None
        if self.number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        self.raw.append(text)
        return text


def records(path: StrPath, *, max_file_bytes: int, max_line_bytes: int) -> Iterator[Record]:
    """Every record of the file, header first; raises TraceFormatError only for the file as a
    whole (too large), every other problem is the record's own."""
    file = os.fspath(path)
    size = os.stat(path).st_size
    if size > max_file_bytes:
        raise TraceFormatError(
            file,
            None,
            None,
            f"{size} bytes, over the {max_file_bytes}-byte limit (GPUFRAG_TRACE__MAX_FILE_BYTES)",
            "file_too_large",
        )
    with open(path, "rb") as fh:
        lines = _Lines(fh, file, max_file_bytes=max_file_bytes, max_line_bytes=max_line_bytes)
        reader = csv.reader(lines, strict=True)
        while True:
            start = lines.number + 1
            lines.raw.clear()
            try:
                fields = next(reader)
            except StopIteration:
                return
            except _BadLine as bad:  # named by the line itself, inside a record or not
                problem = TraceFormatError(file, lines.number, None, bad.reason, bad.code)
                yield Record(lines.number, bad.raw.rstrip("\r\n"), problem)
                continue
            except csv.Error as exc:
                span = (
                    "" if lines.number <= start else f" (record spans lines {start}-{lines.number})"
                )
                problem = TraceFormatError(
                    file, start, None, f"malformed CSV: {exc}{span}", "malformed_csv"
                )
                yield Record(start, "".join(lines.raw).rstrip("\r\n"), problem)
                continue
            yield Record(start, "".join(lines.raw).rstrip("\r\n"), fields)
