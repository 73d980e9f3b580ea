"""The part of CEL that DRA device selectors are written in, evaluated against one device.

DeviceClasses and claims pick devices with CEL. gpufrag needs the same answer the scheduler
gets to say what a pending claim asks for (whole GPUs of which model, which MIG profile) and
why nothing matches. The selectors in use compare the driver and attributes with literals:
``device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"``.
That subset is read here: ``==``, ``!=``, ``in [..]``, ``&&``, ``||``, ``!``, parentheses, a
bare bool attribute, and ``device.attributes["domain"].name`` or ``["domain"]["name"]``.
Anything else (capacity comparisons, semver functions, macros) raises CelUnsupported when
compiled, so the caller can say which expression it could not read instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from models.dra import AttributeValue, DraDevice

__all__ = ["CelUnsupported", "Selector", "compile_selector"]


class CelUnsupported(ValueError):
    """An expression outside the subset gpufrag evaluates."""


@dataclass(frozen=True, slots=True)
class Subject:
    driver: str
    device: DraDevice


Value = AttributeValue
Selector = Callable[[Subject], bool]
_Operand = Callable[[Subject], "Value | _Error"]

_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|(?P<num>-?\d+)'
    r"|(?P<op>&&|\|\||==|!=|!|\(|\)|\[|\]|,|\.)|(?P<name>[A-Za-z_][A-Za-z0-9_]*))"
)


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise CelUnsupported(f"cannot read {text[pos : pos + 20]!r}")
        out.append(match.group().strip())
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise CelUnsupported(f"expected {expected or 'more'}, found {token!r}")
        self.at += 1
        return token

    def parse(self) -> Selector:
        out = self.either()
        if self.peek() is not None:
            raise CelUnsupported(f"unexpected {self.peek()!r}")
        return lambda s: out(s) is True  # an error at the top: the device does not match

    def either(self) -> _Logic:
        parts = [self.both()]
        while self.peek() == "||":
            self.take()
            parts.append(self.both())
        return parts[0] if len(parts) == 1 else _any_of(parts)

    def both(self) -> _Logic:
        parts = [self.unary()]
        while self.peek() == "&&":
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else _all_of(parts)

    def unary(self) -> _Logic:
        if self.peek() == "!":
            self.take()
            inner = self.primary()
            if self.peek() in ("==", "!=", "in"):
                raise CelUnsupported("'!' binds to the left side of a comparison: parenthesize")
            return lambda s: _not(inner(s))
        if self.peek() == "(":
            return self.primary()
        return self.comparison()

    def primary(self) -> _Logic:
        if self.peek() == "(":
            self.take()
            inner = self.either()
            self.take(")")
            return inner
        if self.peek() == "!":
            return self.unary()
        operand = self.operand()
        return lambda s: _truth(operand(s))

    def comparison(self) -> _Logic:
        left = self.operand()
        op = self.peek()
        if op in ("==", "!="):
            self.take()
            right = self.operand()
            same = op == "=="
            return lambda s: _compare(left(s), right(s), same=same)
        if op == "in":
            self.take()
            values = self.literal_list()
            return lambda s: _member(left(s), values)
        return lambda s: _truth(left(s))

    def literal_list(self) -> tuple[Value, ...]:
        self.take("[")
        values: list[Value] = []
        while self.peek() != "]":
            values.append(self.literal())
            if self.peek() != "]":
                self.take(",")
        self.take("]")
        return tuple(values)

    def literal(self) -> Value:
        token = self.take()
        if token[0] in "\"'":
            return _ESCAPE.sub(_unescape, token[1:-1])
        if token in ("true", "false"):
            return token == "true"
        if re.fullmatch(r"-?\d+", token):
            return int(token)
        raise CelUnsupported(f"{token!r} is not a literal")

    def operand(self) -> _Operand:
        token = self.peek()
        if token != "device":
            value = self.literal()
            return lambda s: value
        self.take()
        self.take(".")
        member = self.take()
        if member == "driver":
            return lambda s: s.driver
        if member != "attributes":
            raise CelUnsupported(f"device.{member} is not read (only driver and attributes)")
        self.take("[")
        domain = self.literal()
        self.take("]")
        name: Value
        if self.peek() == ".":
            self.take()
            name = self.take()
        else:
            self.take("[")
            name = self.literal()
            self.take("]")
        if not isinstance(domain, str) or not isinstance(name, str) or not name.isidentifier():
            raise CelUnsupported("an attribute is named by a domain and a name")
        if self.peek() == ".":
            raise CelUnsupported(f"a function on {domain}/{name} is not read")
        key = f"{domain}/{name}"
        return lambda s: s.device.attributes.get(key, ERROR)


class _Error:
    """CEL's error value: what reading a missing attribute gives. ``&&`` and ``||`` absorb it
    where their other side decides (``false && error`` is false), everything else passes it
    on, and a selector that ends in one does not match."""

    __slots__ = ()


ERROR = _Error()
_Logic = Callable[[Subject], "bool | _Error"]
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def _unescape(match: re.Match[str]) -> str:
    return _ESCAPES.get(match.group(1), match.group(1))


def _truth(value: Value | _Error) -> bool | _Error:
    return value if isinstance(value, bool) else ERROR


def _not(value: bool | _Error) -> bool | _Error:
    return value if isinstance(value, _Error) else not value


def _compare(a: Value | _Error, b: Value | _Error, *, same: bool) -> bool | _Error:
    if isinstance(a, _Error) or isinstance(b, _Error):
        return ERROR
    # values of two types are unequal, as CEL's heterogeneous equality has them
    equal = type(a) is type(b) and a == b
    return equal if same else not equal


def _member(value: Value | _Error, values: tuple[Value, ...]) -> bool | _Error:
    if isinstance(value, _Error):
        return ERROR
    return any(type(value) is type(v) and value == v for v in values)


def _all_of(parts: list[_Logic]) -> _Logic:
    def evaluate(s: Subject) -> bool | _Error:
        results = [p(s) for p in parts]
        if False in results:
            return False
        return ERROR if any(isinstance(r, _Error) for r in results) else True

    return evaluate


def _any_of(parts: list[_Logic]) -> _Logic:
    def evaluate(s: Subject) -> bool | _Error:
        results = [p(s) for p in parts]
        if True in results:
            return True
        return ERROR if any(isinstance(r, _Error) for r in results) else False

    return evaluate


@lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Selector:
    """A predicate over (driver, device); CelUnsupported for expressions outside the subset.
    A missing attribute is CEL's error (``&&`` and ``||`` absorb it where their other side
    decides); a selector that ends in one does not match, as the scheduler has it."""
    return _Parser(expression).parse()
