"""Every example YAML of Kubex's public chart docs, applied as a Kubex user would
(`kubectl apply`, kubectl's strict field validation) to the real API server with kerf's
CRDs, as a server-side dry run: nothing is stored, the whole of the server's decoding,
pruning, defaulting, OpenAPI and CEL validation runs."""

from __future__ import annotations

import pytest

from harness.kubectl import Kubectl, KubectlFailed
from tests.compat.examples import EXAMPLES, Example

pytestmark = pytest.mark.e2e


def dry_run(admin: Kubectl, example: Example) -> str | None:
    """None when the server accepts the example, else its refusal."""
    try:
        out = admin("apply", "--dry-run=server", "-f", "-", stdin=example.text)
    except KubectlFailed as exc:
        return str(exc)
    assert "(server dry run)" in out, out
    return None


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_the_real_api_server_gives_the_expected_verdict(admin: Kubectl, example: Example) -> None:
    refused = dry_run(admin, example)
    if example.expect == "accepted":
        assert refused is None, refused
        return
    assert refused is not None, f"{example.name} is accepted now: update its '# expect:'"
    for field in example.fields:
        assert f'unknown field "{field}"' in refused, refused
