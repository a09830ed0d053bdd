"""kerf's build: pure Python, unless KERF_COMPILE=1 compiles the admission path with mypyc.

The image's build (scripts/image-install.sh) sets it; a development install does not, so an
edited module is never shadowed by a stale compiled one. docs/decisions.md says why these
modules and not others.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup

#: What every fresh admission answer runs through: the decision stages and the rules and
#: quantities they apply, the admission memo around them, then the webhook's request
#: checks, patch, answer and log line. Left out (docs/decisions.md says more): app/store/view.py,
#: which interpreted code subclasses; app/store/slim.py, which stores a frozenset where pydantic
#: declares a set; app/store/decision_cache.py, whose generic slotted dataclass fails at import.
COMPILED = [
    "app/decide/",
    "app/policy/guardrails.py",
    "app/model/quantities.py",
    "app/model/workloads.py",
    "app/policy/enablement.py",
    "app/model/owners.py",
    "webhook/review.py",
    "webhook/bounds.py",
    "webhook/limits.py",
    "webhook/patch.py",
    "webhook/finished.py",
    "webhook/logs.py",
    "webhook/metrics.py",
    "webhook/endpoint.py",
]


def compiled_modules(root: Path = Path(__file__).resolve().parent) -> list[str]:
    """The dotted names of the modules COMPILED names (a folder: each of its modules)."""
    paths: list[Path] = []
    for entry in COMPILED:
        paths += sorted((root / entry).glob("*.py")) if entry.endswith("/") else [root / entry]
    parts = [path.relative_to(root).with_suffix("").parts for path in paths]
    return [".".join(p[:-1] if p[-1] == "__init__" else p) for p in parts]


def compiled_extensions() -> list[Extension]:
    """mypyc's extensions for COMPILED when KERF_COMPILE=1, else none."""
    if os.environ.get("KERF_COMPILE") != "1":
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED, opt_level="3")


# setuptools runs this file as __main__; tests and scripts import it for COMPILED.
if __name__ == "__main__":
    setup(ext_modules=compiled_extensions())
