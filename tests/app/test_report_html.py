"""`kerf report -o html` in a real browser: Debian's headless Chromium loads the page with
no console message (no script error, nothing blocked by the page's no-fetch policy),
sorts the workloads from the address's `#sort=`, and leaves a screenshot in
`.artifacts/report/` (git-ignored) to look at.

Chromium is required in CI (`.ci/run` installs it: scripts/get-chromium.sh); elsewhere the
browser tests skip when it is not installed, saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app.outcome.report import Prices, build_report
from kerf.report_html import render_html
from tests.app.builders import NOW
from tests.app.test_report import mixed_view

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".artifacts" / "report"


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if found is None:
        reason = "needs Debian's chromium package (bash scripts/get-chromium.sh)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: required in CI", pytrace=False)
        pytest.skip(reason)
    return found


def browse(page: Path, profile: Path, *flags: str, fragment: str = "") -> tuple[str, list[str]]:
    """Load `page` in headless Chromium: (stdout, the console's lines)."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # tests run as root in containers
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *flags,
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        check=False,
        # Only a bound so a wedged browser cannot hang the suite.
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def report_page(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    page = directory / "report.html"
    report = build_report(mixed_view(), now=NOW)
    page.write_text(render_html(report, Prices(0.04, 0.005, "EUR"), now=NOW), encoding="utf-8")
    return page


def workload_order(dom: str) -> list[str]:
    return re.findall(
        r'<tbody class="workload"><tr class="workload"><td>[^<]*</td>'
        r'<td class="name">([^<]+)</td>',
        dom,
    )


def test_the_page_loads_without_a_console_message_and_sorts_from_the_address(
    tmp_path: Path,
) -> None:
    page = report_page(ARTIFACTS)
    dom, console = browse(page, tmp_path / "profile", "--dump-dom", fragment="#sort=-upsize")
    assert console == []
    assert 'data-ready="true"' in dom, "the page's script did not run to its end"
    # web adds 6.30 EUR a month, cms nothing: descending by upsize puts web first.
    assert workload_order(dom) == ["Deployment/web", "Deployment/cms"]
    assert 'id="col-upsize" class="sortable num" aria-sort="descending"' in dom
    dom, _ = browse(page, tmp_path / "profile", "--dump-dom", fragment="#sort=-reclaim")
    assert workload_order(dom) == ["Deployment/cms", "Deployment/web"]


def test_a_screenshot_is_kept_as_an_artefact(tmp_path: Path) -> None:
    page = report_page(tmp_path)
    shot = ARTIFACTS / "report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.unlink(missing_ok=True)
    _, console = browse(
        page,
        tmp_path / "profile",
        f"--screenshot={shot}",
        "--window-size=1400,900",
        "--hide-scrollbars",
    )
    assert console == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_console_check_sees_a_broken_script_and_a_blocked_fetch(tmp_path: Path) -> None:
    page = report_page(tmp_path)
    html = page.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(
        html.replace(
            "</body>",
            '<img src="https://example.invalid/x.png"><script>notDefined();</script></body>',
        ),
        encoding="utf-8",
    )
    _, console = browse(broken, tmp_path / "profile", "--dump-dom")
    text = "\n".join(console)
    assert "notDefined is not defined" in text
    assert "Content Security Policy" in text


def test_the_page_names_nothing_to_fetch(tmp_path: Path) -> None:
    html = report_page(tmp_path).read_text(encoding="utf-8")
    assert not re.search(r"\b(src|href)\s*=|url\(|@import|https?://", html)


def test_each_namespace_has_a_bar_of_saved_and_reclaimable_scaled_to_the_largest(
    tmp_path: Path,
) -> None:
    html = report_page(tmp_path).read_text(encoding="utf-8")
    bars = re.findall(
        r'<div class="bar"><span class="saved" style="width:([0-9.]+)%"></span>'
        r'<span class="reclaim" style="width:([0-9.]+)%"></span></div>',
        html,
    )
    # blog reclaims 5.29 EUR a month, shop 0.91; nothing is saved yet; no bar for the cluster.
    assert [(float(s), float(r)) for s, r in bars] == [
        (0.0, 100.0),
        (0.0, pytest.approx(17.2, abs=0.1)),
    ]
