"""``Record``: ``typing.NamedTuple``'s class syntax without importing typing (a fifth of `elfpatch unique
--check`'s start-up, on a path run once per file by build scripts).

    class Edit(Record):
        offset: int
        old: int

is ``collections.namedtuple("Edit", ["offset", "old"])`` with the class body's methods and docstring: the
fields are the annotated names, in order (no defaults)."""
from __future__ import annotations

import sys
from collections import namedtuple

# mypy takes any name TYPE_CHECKING as true (typing's own would cost importing typing): to the checker a record
# is a typing.NamedTuple, so its fields, constructor and tuple methods are checked; at run time it is the class
# below.
TYPE_CHECKING = False
__all__ = ["Record"]  # also under the checker, where Record is an import


class _RecordType(type):
    def __new__(mcs, name: str, bases: tuple, namespace: dict) -> type:
        if not bases:  # Record itself
            return super().__new__(mcs, name, bases, namespace)
        annotations = namespace.get("__annotations__")
        if annotations is None and sys.version_info >= (3, 14) and "__annotate__" in namespace:  # no __future__ import
            import annotationlib

            annotations = annotationlib.call_annotate_function(namespace["__annotate__"],
                                                               annotationlib.Format.FORWARDREF)
        fields = list(annotations or {})
        if not fields:
            raise TypeError(f"record {name} declares no fields")
        body = {k: v for k, v in namespace.items() if k not in ("__annotations__", "__slots__")}
        return type(name, (namedtuple(name, fields, module=namespace.get("__module__")),),
                    {**body, "__slots__": ()})


if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    class Record(metaclass=_RecordType):
        """Base of a record class: see the module docstring."""
