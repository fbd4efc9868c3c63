"""Every command's ``--json`` document, read as a user's job would: parsed, then validated against the JSON
Schema the package ships for its command (named by the document's ``schema`` key), and held to the envelope's
counts (``summary.files`` is every entry of ``files``, ``summary.errors`` every one whose status is "error")."""
from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_ID = re.compile(r"elfpatch/(unique|audit|inits|dlcheck)/([0-9]+)")


@functools.cache
def validator(command: str) -> Draft202012Validator:
    """The validator of ``command``'s schema, read from the installed package (so a schema left out of its
    package data fails here)."""
    schema = json.loads(resources.files("elfpatch").joinpath("schemas", f"{command}.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def check_document(doc: Any) -> dict[str, Any]:
    """``doc`` if it is a valid document of the command its ``schema`` names; else an AssertionError that says
    where it is not."""
    assert isinstance(doc, dict) and isinstance(doc.get("schema"), str), f"no schema key: {doc!r:.300}"
    m = SCHEMA_ID.fullmatch(doc["schema"])
    assert m, f"unknown schema {doc['schema']!r}"
    errors = sorted(validator(m[1]).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message:.300}" for e in errors[:5])
    files, summary = doc["files"], doc["summary"]
    assert summary["files"] == len(files), (summary, len(files))
    assert summary["errors"] == sum(f["status"] == "error" for f in files), (summary, files)
    return doc


def cli_json(text: str) -> dict[str, Any]:
    """A command's ``--json`` output, parsed and checked (see ``check_document``)."""
    return check_document(json.loads(text))
