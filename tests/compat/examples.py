"""The example YAML of Kubex's public chart docs (densify-dev/helm-charts,
charts/kubex-automation-engine/docs), one object a file under `fixtures/`, each headed by
where it comes from and what kerf must do with it:

- `# expect: accepted`: the API server with kerf's CRDs stores it as written;
- `# expect: refused "spec.a" "spec.b"`: refused, naming those fields (an example that
  Kubex's own CRDs refuse too; `# why:` says so);
- `# expect: pending issue N`: refused today, accepted once issue N lands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures"
_EXPECT = re.compile(r"^# expect: (accepted|refused|pending issue (\d+))(.*)$", re.M)


@dataclass(frozen=True)
class Example:
    """One object of one code block of Kubex's docs."""

    name: str
    text: str
    obj: dict[str, Any]
    expect: str  # accepted | refused | pending
    fields: tuple[str, ...]  # the fields a refusal names
    issue: int | None

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def namespace(self) -> str | None:
        return (self.obj.get("metadata") or {}).get("namespace")


def load(path: Path) -> Example:
    text = path.read_text()
    found = _EXPECT.search(text)
    if found is None:
        raise ValueError(f"{path.name}: no '# expect:' line")
    verdict, issue, rest = found.groups()
    return Example(
        name=path.stem,
        text=text,
        obj=yaml.safe_load(text),
        expect="pending" if issue else verdict,
        fields=tuple(re.findall(r'"([^"]+)"', rest)),
        issue=int(issue) if issue else None,
    )


EXAMPLES: tuple[Example, ...] = tuple(load(p) for p in sorted(FIXTURES.glob("*.yaml")))
