"""docs/install.md as a script: its `rehearse` blocks, and bash to run them verbatim.

Shared by the guide's rehearsal on kubesim (tests/integration/test_install_guide.py) and
on the real control plane (tests/e2e/test_install_guide.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path

from tests.kubesim.test_kubectl import kubectl_binary

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "install.md"
FENCE = re.compile(r"^```(\S*)[ \t]*(\S*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
#: a key people set: `kerf cleanup` must leave it
PAUSE = {"rightsizing.kubex.ai/pause-until": "infinite"}
#: where the guide writes its overlay (a working file, out of the repository)
OVERLAY = '"${TMPDIR:-/tmp}/kerf-install/overlay"'
#: the guide's commands that apply and delete kerf
APPLY_KERF = f"kubectl apply -k {OVERLAY}"
DELETE_KERF = f"kubectl delete -k {OVERLAY}"
#: how long one block may run (a bound, not an expectation)
BLOCK_TIMEOUT_S = 300


def blocks(marker: str) -> list[str]:
    """The code of the fenced blocks whose info string carries `marker`, in order."""
    return [code for _, tag, code in FENCE.findall(GUIDE.read_text()) if tag == marker]


def kubectl_lines(code: str) -> list[str]:
    """The lines of `code` that run kubectl."""
    return [line.strip() for line in code.splitlines() if re.search(r"(^|\|\s*)kubectl ", line)]


class Rehearsal:
    """A copy of the repository's user-facing files, and bash with kubectl and kerf."""

    def __init__(self, kubeconfig: Path, tmp_path: Path) -> None:
        self.kubeconfig = kubeconfig
        self.cwd = tmp_path / "repo"
        for part in ("manifests", "examples"):
            shutil.copytree(ROOT / part, self.cwd / part)
        venv_bin = self.cwd / ".venv" / "bin"
        venv_bin.mkdir(parents=True)
        (venv_bin / "kerf").symlink_to(Path(sys.executable).parent / "kerf")
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "kubectl").symlink_to(kubectl_binary())
        (tmp_path / "home").mkdir()
        #: the temporary directory the guide's working files go to
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        self.env = {
            "PATH": f"{tools}:{os.environ['PATH']}",
            "KUBECONFIG": str(kubeconfig),
            "HOME": str(tmp_path / "home"),
            # `.venv/bin/kerf` runs this tree's kerf, wherever the virtualenv was made
            "PYTHONPATH": str(ROOT),
            "TMPDIR": str(self.tmpdir),
        }
        self.ran: list[str] = []

    async def run(self, code: str) -> str:
        """Run one block in bash (-euo pipefail); its stdout. A failure fails the test."""
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-euo",
            "pipefail",
            "-c",
            code,
            cwd=self.cwd,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), BLOCK_TIMEOUT_S)
        assert proc.returncode == 0, f"{code}\nexit {proc.returncode}\n{out.decode()}{err.decode()}"
        self.ran.append(code)
        return out.decode()


async def dry_run_until_sized(rehearsal: Rehearsal, code: str) -> str:
    """The webhook learns the policy by watch; the first pod may be decided before it."""
    for _ in range(300):
        out = await rehearsal.run(code)
        if '"cpu":"250m"' in out:
            return out
        await asyncio.sleep(0.2)
    return out


def assert_sized(out: str) -> None:
    """The dry-run pod came back with the first policy's values."""
    assert '"requests":{"cpu":"250m","memory":"256Mi"}' in out, out
    assert '"limits":{"cpu":"500m","memory":"512Mi"}' in out, out
