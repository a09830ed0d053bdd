"""kubectl with one kubeconfig."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError

ROOT = Path(__file__).resolve().parents[1]
KUBECTL = os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")


class KubectlFailed(HarnessError):
    """kubectl exited non-zero."""


@dataclass
class Kubectl:
    """kubectl with one kubeconfig, run from the repository's root."""

    kubeconfig: Path

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run kubectl; its stdout (raises KubectlFailed with stderr when it fails and
        `check`, else returns stdout and stderr)."""
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise KubectlFailed(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout if check else done.stdout + done.stderr

    def json(self, *args: str) -> Any:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self("get", *args, "-o", "json"))

    def apply(self, obj: dict[str, Any] | list[dict[str, Any]]) -> None:
        """`kubectl apply -f -` of one object or several."""
        docs = obj if isinstance(obj, list) else [obj]
        self("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
