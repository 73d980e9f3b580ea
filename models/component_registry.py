"""Named extension points: one registry per kind of component (detector, planner, alert sink,
live source, output), each a name mapped to a builder.

The descheduler's plugin registry is the model: the product registers its own components the
same way an extension does, so a new one is its module plus one ``register`` line, and a
setting that names a component is checked against what is registered, with the known names
in the error. It lives in ``models`` because both ``connectors`` and ``streams`` register
into registries and neither may import the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["DuplicateComponent", "Registry", "UnknownComponent"]

B = TypeVar("B")


class UnknownComponent(LookupError):
    """A setting or option named a component no module registered."""

    def __init__(self, what: str, name: str, known: tuple[str, ...]) -> None:
        self.what = what
        self.name = name
        self.known = known
        listed = ", ".join(known) if known else "none"
        super().__init__(f"unknown {what} {name!r} (known: {listed})")

    def __str__(self) -> str:
        return str(self.args[0])


class DuplicateComponent(ValueError):
    """Two modules registered the same name: the second would silently replace the first."""


class Registry(Generic[B]):
    """Builders by name, in registration order (the order components are built and run)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._builders: dict[str, B] = {}

    def register(self, name: str, builder: B) -> B:
        """Add ``builder`` under ``name``; returns it, so a class can register itself."""
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"{self.what} name {name!r}: letters, digits, '_' and '-' only")
        if name in self._builders:
            raise DuplicateComponent(f"{self.what} {name!r} is registered twice")
        self._builders[name] = builder
        return builder

    def registers(self, name: str) -> Callable[[B], B]:
        """The decorator form of ``register``."""
        return lambda builder: self.register(name, builder)

    def get(self, name: str) -> B:
        try:
            return self._builders[name]
        except KeyError:
            raise UnknownComponent(self.what, name, self.names()) from None

    def check(self, names: tuple[str, ...] | list[str]) -> None:
        """Every one of ``names`` is registered (a setting read before anything is built)."""
        for name in names:
            self.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._builders)

    def items(self) -> Iterator[tuple[str, B]]:
        return iter(list(self._builders.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._builders

    def __len__(self) -> int:
        return len(self._builders)
