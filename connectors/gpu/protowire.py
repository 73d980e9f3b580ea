"""The few pieces of the protobuf wire format the pod-resources client needs.

Three small messages do not justify generated code and a protobuf runtime on every node; what
matters is the wire (field numbers and types), and it is checked in the tests against the
protobuf library's own encoder.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that are not a protobuf message (truncated, or a wire type proto3 never sends)."""


def varint(value: int) -> bytes:
    if value < 0:
        raise ValueError("only tags and lengths are encoded here: never negative")
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def len_field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | LEN) + varint(len(payload)) + payload


def str_field(number: int, text: str) -> bytes:
    """A singular string field; proto3 leaves an empty one off the wire."""
    return len_field(number, text.encode()) if text else b""


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) in wire order: an int for varints, the raw bytes otherwise, so a
    newer kubelet's extra fields are skipped rather than refused."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, pos = _read_varint(data, pos)
        elif wire in (I64, I32):
            size = 8 if wire == I64 else 4
            value, pos = data[pos : pos + size], pos + size
        elif wire == LEN:
            size, pos = _read_varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        else:
            raise WireError(f"wire type {wire} (field {number}) is not proto3")
        if pos > len(data):
            raise WireError(f"field {number} runs past the end of the message")
        if number == 0:
            raise WireError("field number 0")
        yield number, value


def as_bytes(value: int | bytes) -> bytes:
    if isinstance(value, int):
        raise WireError("a varint where a length-delimited field was expected")
    return value


def as_str(value: int | bytes) -> str:
    try:
        return as_bytes(value).decode()
    except UnicodeDecodeError as exc:
        raise WireError(f"a string field is not UTF-8: {exc}") from None
