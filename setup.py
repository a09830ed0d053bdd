"""kerf's build: pure Python, unless KERF_COMPILE=1 compiles the decision modules with mypyc.

The image's build (scripts/image-install.sh) sets it; a development install does not, so an
edited module is never shadowed by a stale compiled one. docs/decisions.md says why these
modules and not others.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

#: The modules every fresh admission decision runs through, in order of their cost.
COMPILED = [
    "app/decide/",
    "app/guardrails.py",
    "app/quantities.py",
]


def compiled_extensions() -> list[Extension]:
    """mypyc's extensions for COMPILED when KERF_COMPILE=1, else none."""
    if os.environ.get("KERF_COMPILE") != "1":
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED, opt_level="3")


# setuptools runs this file as __main__; tests/test_image.py imports it for COMPILED.
if __name__ == "__main__":
    setup(ext_modules=compiled_extensions())
