"""Auditing (`elfpatch audit`): unique names defined by several files, which package owns a file (named so that it
does not shadow `elfpatch.audit`)."""
