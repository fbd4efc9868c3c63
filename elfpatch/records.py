"""``Record``: ``typing.NamedTuple``'s class syntax without importing typing (a fifth of `elfpatch unique
--check`'s start-up, on a path run once per file by build scripts).

    class Edit(Record):
        offset: int
        old: int

is ``collections.namedtuple("Edit", ["offset", "old"])`` with the class body's methods and docstring: the
fields are the annotated names, in order (no defaults)."""
from __future__ import annotations

from collections import namedtuple


class _RecordType(type):
    def __new__(mcs, name: str, bases: tuple, namespace: dict) -> type:
        if not bases:  # Record itself
            return super().__new__(mcs, name, bases, namespace)
        fields = list(namespace.get("__annotations__", {}))
        body = {k: v for k, v in namespace.items() if k not in ("__annotations__", "__slots__")}
        return type(name, (namedtuple(name, fields, module=namespace.get("__module__")),),
                    {**body, "__slots__": ()})


class Record(metaclass=_RecordType):
    """Base of a record class: see the module docstring."""
