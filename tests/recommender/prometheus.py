"""A real Prometheus for the recommender's tests: Debian's `prometheus` and `promtool`.

`backfill` writes a history the test generates (OpenMetrics text) into TSDB blocks with
`promtool tsdb create-blocks-from openmetrics`; `running_prometheus` starts the server on a
free port over a temporary storage dir (and optional scrape targets) and waits until it is
ready. Tests that need it skip, saying why, when the binaries are not installed
(`.ci/run` installs them: scripts/get-prometheus.sh).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
#: how long a condition may take to come true (a bound, not an expectation)
WAIT_S = 60.0

needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="needs Debian's prometheus package (prometheus and promtool on PATH): "
    "bash scripts/get-prometheus.sh",
)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` past the bound."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return result


def backfill(openmetrics: str, storage: Path) -> None:
    """Write `openmetrics` (ending in `# EOF`) as TSDB blocks into `storage`."""
    assert PROMTOOL is not None
    storage.mkdir(parents=True, exist_ok=True)
    source = storage.parent / f"{storage.name}.om"
    source.write_text(openmetrics)
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(storage)],
        check=True,
        capture_output=True,
        timeout=WAIT_S,
    )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_prometheus(
    storage: Path,
    scrape: list[str] | None = None,
    interval: str = "1s",
    tls: dict[str, Path] | None = None,
) -> Iterator[str]:
    """A Prometheus over `storage` on a free port (scraping `scrape`, "host:port/path"
    targets, or "https://host:port/path" ones with `tls`: its `ca_file`, `cert_file` and
    `key_file`), ready on entry, stopped on exit; yields its base URL."""
    assert PROMETHEUS is not None
    storage.mkdir(parents=True, exist_ok=True)
    jobs = ""
    for index, target in enumerate(scrape or []):
        secure = target.startswith("https://")
        address, _, path = target.removeprefix("https://").partition("/")
        jobs += (
            f"  - job_name: target{index}\n"
            f"    metrics_path: /{path}\n"
            f"    honor_labels: true\n"
            f"    static_configs: [{{targets: ['{address}']}}]\n"
        )
        if secure:
            assert tls is not None, f"{target}: https needs tls files"
            files = ", ".join(f"{key}: '{value}'" for key, value in sorted(tls.items()))
            jobs += f"    scheme: https\n    tls_config: {{{files}}}\n"
    config = storage.parent / f"{storage.name}.yml"
    config.write_text(
        f"global: {{scrape_interval: {interval}, evaluation_interval: {interval}}}\n"
        + ("scrape_configs:\n" + jobs if jobs else "")
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (storage.parent / f"{storage.name}.log").open("w")
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={storage}",
            "--storage.tsdb.retention.time=3650d",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: process.poll() is not None or _ready(url), "Prometheus to be ready")
        if process.poll() is not None:
            log.flush()
            raise AssertionError(
                "prometheus exited: " + (storage.parent / f"{storage.name}.log").read_text()[-2000:]
            )
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
