"""A name -> entry table with clear errors: one registry per kind (problems, agents, metrics)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from testbed import names as names_
from testbed.errors import MAX_LISTED, InputError

T = TypeVar("T")


def unknown_name(field: str, name: object, names: Iterable[str]) -> InputError:
    """`bad_value(field, name, names)` with "did you mean 'x'?" when a name is close
    (`testbed.names.unknown_name`, whose words the command line's index says too)."""
    return InputError(names_.unknown_name(field, name, names, MAX_LISTED))


class Registry(Generic[T]):
    """Entries by unique name. `register` works as a call or as a decorator."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T | None = None) -> Callable[[T], T] | T:
        def add(item: T) -> T:
            if name in self._entries:
                raise InputError(
                    f"{self.kind} {name!r} is registered twice; allowed: a new name (code "
                    "that registers, run again in one session, such as a notebook cell, "
                    "registers again: restart, or pick another name)"
                )
            self._entries[name] = item
            return item

        return add if entry is None else add(entry)

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise unknown_name(self.kind, name, sorted(self._entries))
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    @contextlib.contextmanager
    def scope(self) -> Iterator[Registry[T]]:
        """Within: registrations as usual; on leaving, the registry is as it was (what a
        test or a notebook tries out is undone)."""
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries.clear()
            self._entries.update(saved)
