"""Patching: edits recorded first, then verified and applied (named so that it does not shadow `elfpatch.patch`)."""
