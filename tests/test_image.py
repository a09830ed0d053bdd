"""The container image's install steps give a working kerf, with no container engine.

The test builds a context the way the Dockerfile's build stage does (its `COPY` lines),
runs the same install script its `RUN` line runs, then starts kerf as the image does: a
non-root numeric user, with the final stage's environment, from a read-only working
directory and a read-only HOME. `make image` builds the real image where docker or podman
can, `make node-images` with buildah (tests/devcluster/test_kerf_image.py checks that one);
this test runs everywhere.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webhook.test_manifests import MANIFESTS, render

#: the longest files start first (tests/conftest.py)
pytestmark = pytest.mark.early

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
SCRIPT_IN_IMAGE = "/usr/local/bin/image-install.sh"
TEST_ONLY = ("pytest", "hypothesis", "kubernetes_validate", "ruff", "jsonschema", "httpx", "mypy")
#: The product: the kerf command, the library and the services.
PRODUCT = ("kerf", "app", "webhook", "reconciler", "recommender")
#: The source tree's dev tools, which neither the wheel nor the image carries.
DEV_TOOLS = ("kubesim", "demo", "benchmarks", "harness", "soak", "devcluster", "tests")


def outside_env() -> dict[str, str]:
    """This environment without PYTHONPATH, which the image does not set: `make
    test-compiled` puts its copy of the tree there, and the image must not import from it."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions (keyword, arguments) per stage, continuations joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            out.append([])
        if out:
            out[-1].append((keyword.upper(), rest.strip()))
    return out


def user_id() -> int:
    [(_, user)] = [i for i in stages()[-1] if i[0] == "USER"]
    return int(user.split(":")[0])


def final_environment() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in stages()[-1]:
        if keyword == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    """The virtualenv the build stage makes, from a context copied as its COPY lines say."""
    # Not pytest's tmp_path: its parents are mode 0700, closed to the non-root user.
    top = Path(tempfile.mkdtemp(prefix="kerf-image-", dir="/tmp"))
    try:
        top.chmod(0o755)
        context = top / "src"
        build, _final = stages()
        for keyword, rest in build:
            if keyword != "COPY" or rest.startswith("--from"):
                continue
            *sources, dest = rest.split()
            for source in sources:
                if dest == SCRIPT_IN_IMAGE:
                    continue
                target = context / dest.rstrip("/") if dest != "./" else context / source
                if (ROOT / source).is_dir():
                    shutil.copytree(
                        ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / source, target)
        runs = [rest for keyword, rest in build if keyword == "RUN"]
        # The compiler's install (apt, for mypyc) comes first; this machine already has one.
        assert runs[-1] == f"sh {SCRIPT_IN_IMAGE} /src /opt/kerf"
        assert all("apt-get" in run for run in runs[:-1])
        venv = top / "opt-kerf"
        done = subprocess.run(
            ["sh", str(ROOT / "scripts" / "image-install.sh"), str(context), str(venv)],
            env=outside_env(),
            capture_output=True,
            text=True,
            # A bound against a hang, not a time: compiling with mypyc took over 10 minutes
            # with both cores busy and more beside them.
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr
        yield venv
    finally:
        shutil.rmtree(top, ignore_errors=True)


def run_as_image_user(
    venv: Path, workdir: Path, home: Path, *argv: str
) -> subprocess.CompletedProcess[str]:
    env = {**final_environment(), "HOME": str(home)}
    env["PATH"] = f"{venv}/bin:/usr/bin:/bin"
    uid = user_id()
    prefix = []
    if os.geteuid() == 0:
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return subprocess.run(
        [*prefix, *argv], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )


def read_only_tree(top: Path) -> tuple[Path, Path]:
    """A working directory holding the storefront example and a HOME, both read-only."""
    workdir, home = top / "work", top / "home"
    shutil.copytree(ROOT / "examples" / "storefront", workdir / "examples" / "storefront")
    home.mkdir()
    for path in (*workdir.rglob("*"), workdir, home, top):
        path.chmod(0o555 if path.is_dir() else 0o444)
    return workdir, home


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    assert user_id() > 0
    env = final_environment()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"].startswith("/opt/kerf/bin:")
    [entrypoint] = [rest for keyword, rest in stages()[-1] if keyword == "ENTRYPOINT"]
    assert entrypoint == '["kerf"]'


def test_installed_kerf_runs_read_only_as_the_image_user(installed: Path) -> None:
    top = Path(tempfile.mkdtemp(prefix="kerf-ro-", dir="/tmp"))
    try:
        top.chmod(0o755)
        workdir, home = read_only_tree(top)
        # The user really cannot write there (as root this would prove nothing).
        probe = run_as_image_user(installed, workdir, home, "touch", "probe")
        assert probe.returncode != 0 and "Permission denied" in probe.stderr
        for command in ("certs", "webhook", "reconciler", "review", "explain", "cleanup"):
            done = run_as_image_user(installed, workdir, home, "kerf", command, "--help")
            assert done.returncode == 0, done.stderr
            assert f"usage: kerf {command}" in done.stdout
        done = run_as_image_user(
            installed, workdir, home, "kerf", "explain", "-f", "examples/storefront", "-o", "text"
        )
        assert done.returncode == 0, done.stderr
        assert "shop/api-" in done.stdout and "apply" in done.stdout
        assert sorted(p.name for p in workdir.iterdir()) == ["examples"]
        assert list(home.iterdir()) == []
    finally:
        for path in (top, *top.rglob("*")):
            if path.is_dir():
                path.chmod(stat.S_IRWXU)
        shutil.rmtree(top, ignore_errors=True)


def test_the_virtualenv_holds_runtime_dependencies_only(installed: Path) -> None:
    python = str(installed / "bin" / "python")
    for module in (*TEST_ONLY, *DEV_TOOLS, "pip", "setuptools"):
        done = subprocess.run(
            [python, "-c", f"import {module}"],
            cwd="/",
            env=outside_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0, f"{module} is installed in the image's virtualenv"
    done = subprocess.run(
        [python, "-c", f"import {', '.join(PRODUCT)}, cryptography, uvicorn, kubernetes_asyncio"],
        cwd="/",
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_image_runs_the_compiled_admission_path(installed: Path) -> None:
    """setup.py's compiled build: each module it names is an extension in the image."""
    from setup import compiled_modules

    modules = compiled_modules()
    assert "app.decide.checks" in modules
    shown = "; ".join(f"import {m}; print({m}.__file__)" for m in modules)
    done = subprocess.run(
        [str(installed / "bin" / "python"), "-c", shown],
        cwd="/",
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    files = done.stdout.split()
    assert len(files) == len(modules)
    assert all(f.endswith(".so") for f in files), files


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_dev_tool() -> None:
    """.dockerignore excludes everything but what COPY names: a source it leaves out breaks
    `make image`, a dev tool it lets in would be a sign it reaches the image."""
    allowed = {
        line.removeprefix("!").rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    build, _final = stages()
    copied = {
        source.rstrip("/")
        for keyword, rest in build
        if keyword == "COPY" and not rest.startswith("--from")
        for source in rest.split()[:-1]
    }
    assert copied == allowed
    assert set(PRODUCT) <= copied
    assert not copied & set(DEV_TOOLS)


def test_the_manifests_name_the_image_make_image_builds() -> None:
    done = subprocess.run(
        ["make", "-s", "image-name"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    built = done.stdout.strip()
    images = {
        container["image"]
        for obj in render(MANIFESTS)
        if obj["kind"] == "Deployment"
        for container in obj["spec"]["template"]["spec"]["containers"]
    }
    assert images == {built}
    assert built.startswith("kerf:")
