"""What a demo's narration must not show: Python reprs, raw JSON, timestamps in more than
one format (issue 36, part 6). Shared by `make demo`'s and `make demo-real`'s tests."""

from __future__ import annotations

import re

#: `{'cpu': '250m'}`, `['256Mi', '256Mi']`, `{"app":{…}}`
INTERNALS = re.compile(r"""\{'|\['|'\]|'\}|\{"|":\{""")
#: Anything that looks like an RFC 3339 time, and the one form the narration writes.
TIME = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d)?")
ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def leaks(out: str) -> list[str]:
    """The lines of `out` that show internals or a time in another format."""
    return [
        line
        for line in out.splitlines()
        if INTERNALS.search(line) or any(not ONE_FORMAT.fullmatch(t) for t in TIME.findall(line))
    ]
