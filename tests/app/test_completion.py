"""`kerf --version` from the package metadata, and `kerf completion bash|zsh` completing
subcommands, options and option values in a real bash."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

KERF = str(Path(sys.executable).parent / "kerf")


def kerf(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KERF, *argv], capture_output=True, text=True, timeout=60)


def test_version_is_the_installed_package_version() -> None:
    done = kerf("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"kerf {version('kerf')}"


def complete(script: str, *words: str) -> list[str]:
    """What bash offers after `words` (the last one is being typed)."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        '_kerf_complete; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_subcommands_options_and_their_values() -> None:
    script = kerf("completion", "bash").stdout
    assert complete(script, "kerf", "re") == ["recommend", "reconciler", "report", "review"]
    assert "--cpu-price" in complete(script, "kerf", "report", "--")
    assert complete(script, "kerf", "report", "-o", "") == [
        "table",
        "wide",
        "csv",
        "json",
        "markdown",
        "html",
    ]
    assert complete(script, "kerf", "explain", "--for", "a") == ["admission"]


def test_zsh_gets_the_same_function_through_bashcompinit() -> None:
    zsh = kerf("completion", "zsh").stdout
    assert zsh.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert zsh.endswith(kerf("completion", "bash").stdout)


def test_an_unknown_shell_is_refused() -> None:
    done = kerf("completion", "fish")
    assert done.returncode == 2 and "invalid choice" in done.stderr
