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

__all__ = ["CelUnsupported", "Selector", "compile_selector", "matches"]


class CelUnsupported(ValueError):
    """An expression outside the subset gpufrag evaluates."""


@dataclass(frozen=True, slots=True)
class Subject:
    driver: str
    device: DraDevice


Value = AttributeValue | None
Selector = Callable[[Subject], bool]
_Operand = Callable[[Subject], Value]

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
        return out

    def either(self) -> Selector:
        parts = [self.both()]
        while self.peek() == "||":
            self.take()
            parts.append(self.both())
        return parts[0] if len(parts) == 1 else (lambda s: any(p(s) for p in parts))

    def both(self) -> Selector:
        parts = [self.unary()]
        while self.peek() == "&&":
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else (lambda s: all(p(s) for p in parts))

    def unary(self) -> Selector:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda s: not inner(s)
        if self.peek() == "(":
            self.take()
            inner = self.either()
            self.take(")")
            return inner
        return self.comparison()

    def comparison(self) -> Selector:
        left = self.operand()
        op = self.peek()
        if op in ("==", "!="):
            self.take()
            right = self.operand()
            if op == "==":
                return lambda s: _equal(left(s), right(s))
            return lambda s: not _equal(left(s), right(s))
        if op == "in":
            self.take()
            values = self.literal_list()
            return lambda s: any(_equal(left(s), v) for v in values)
        return lambda s: left(s) is True

    def literal_list(self) -> tuple[Value, ...]:
        self.take("[")
        values: list[Value] = []
        while self.peek() != "]":
            values.append(self.literal())
            if self.peek() == ",":
                self.take()
        self.take("]")
        return tuple(values)

    def literal(self) -> Value:
        token = self.take()
        if token[0] in "\"'":
            return bytes(token[1:-1], "utf-8").decode("unicode_escape")
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
        return lambda s: s.device.attributes.get(key)


def _equal(a: Value, b: Value) -> bool:
    return a is not None and b is not None and type(a) is type(b) and a == b


@lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Selector:
    """A predicate over (driver, device); CelUnsupported for expressions outside the subset.
    A missing attribute compares unequal, as the scheduler treats a device whose selector
    fails on a missing key: it does not match."""
    return _Parser(expression).parse()


def matches(expressions: tuple[str, ...], *, driver: str, device: DraDevice) -> bool:
    subject = Subject(driver=driver, device=device)
    return all(compile_selector(e)(subject) for e in expressions)
