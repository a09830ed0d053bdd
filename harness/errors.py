"""What goes wrong while running kerf locally: one base, so a caller can say it in one
line. They are AssertionErrors so that a test that meets one fails rather than errors."""

from __future__ import annotations


class HarnessError(AssertionError):
    """A step of starting or driving kerf on a local cluster failed."""
