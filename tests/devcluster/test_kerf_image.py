"""The kerf image `make node-images` builds (devcluster/kerfimage.py: the Dockerfile by
buildah over a Debian bookworm base), checked in the tarball a node imports, not in a
stand-in: its name and config are what the manifests and the Dockerfile's final stage say,
its layers are the ones its config names, and kerf runs in its root filesystem (unpacked
here, entered with chroot as the image's user) with the compiled admission path and no
build tool. Skipped when the tarball is not built; tests/test_image.py checks the install
steps everywhere.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.images import host_arch
from devcluster.kerfimage import (
    BASE_CONFIG,
    BASE_IMAGE,
    TARBALL,
    build,
    context_files,
    docker_reference,
    main,
    write_base_archive,
)
from devcluster.processes import ComponentError, images_dir
from tests.test_image import DEV_TOOLS, PRODUCT, TEST_ONLY, final_environment, stages

ROOT = Path(__file__).resolve().parents[2]
KERF_TAR = images_dir() / TARBALL
needs_image = pytest.mark.skipif(
    not KERF_TAR.is_file(), reason=f"run make node-images ({KERF_TAR} is not built)"
)
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


def dockerfile(keyword: str) -> str:
    [value] = [rest for key, rest in stages()[-1] if key == keyword]
    return value


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    """The archive's one image: its manifest entry and its config."""
    with tarfile.open(KERF_TAR) as archive:

        def read(name: str) -> Any:
            stream = archive.extractfile(name)
            assert stream is not None, name
            return json.loads(stream.read())

        [entry] = read("manifest.json")
        return {"manifest": entry, "config": read(entry["Config"])}


def _directory(root: Path, name: str) -> Path:
    """The directory `name` in root, resolved; refused when it leaves root."""
    real = os.path.realpath(root / name)
    if real != str(root) and not real.startswith(f"{root}/"):
        raise AssertionError(f"{name} leaves the root filesystem")
    return Path(real)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def unpack(layers: list[str], root: Path) -> None:
    """The layers, in order, into root: whiteouts applied, device nodes and fifos left out
    (a runtime mounts /dev); the tar filter refuses any path that leaves root."""
    with tarfile.open(KERF_TAR) as archive:
        for name in layers:
            stream = archive.extractfile(name)
            assert stream is not None, name
            with stream, tarfile.open(fileobj=stream, mode="r|") as layer:
                for member in layer:
                    parent, _, base = member.name.rstrip("/").rpartition("/")
                    if base == OPAQUE:
                        for child in _directory(root, parent or ".").iterdir():
                            _remove(child)
                    elif base.startswith(WHITEOUT):
                        _remove(_directory(root, parent or ".") / base.removeprefix(WHITEOUT))
                    elif not (member.ischr() or member.isblk() or member.isfifo()):
                        layer.extract(member, root, numeric_owner=True, filter="tar")


@pytest.fixture(scope="module")
def rootfs(image: dict[str, Any]) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("not root: unpacking the image's owners and chroot need root")
    top = Path(tempfile.mkdtemp(prefix="kerf-rootfs-", dir="/tmp"))
    try:
        top.chmod(0o755)
        root = (top / "root").resolve()
        root.mkdir()
        unpack(image["manifest"]["Layers"], root)
        # What a test reads, root's and read-only to the image's user, like the image.
        shutil.copytree(ROOT / "examples" / "storefront", root / "examples" / "storefront")
        yield root
    finally:
        shutil.rmtree(top, ignore_errors=True)


def run_in(root: Path, config: dict[str, Any], *argv: str) -> subprocess.CompletedProcess[str]:
    """argv in the image as a runtime starts it: chroot into root, as the config's user,
    with only the config's environment, in its working directory (chroot's `/`)."""
    env = dict(pair.split("=", 1) for pair in config["config"]["Env"])
    assert config["config"]["WorkingDir"] == "/"
    return subprocess.run(
        ["chroot", f"--userspec={config['config']['User']}", str(root), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_image
def test_the_archive_holds_the_image_the_manifests_name(image: dict[str, Any]) -> None:
    done = subprocess.run(
        ["make", "-s", "image-name"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # As containerd stores it, and as the CRI plugin resolves the manifests' `kerf:X`.
    assert image["manifest"]["RepoTags"] == [docker_reference(done.stdout.strip())]
    config = image["config"]
    assert (config["os"], config["architecture"]) == ("linux", host_arch())
    layers = image["manifest"]["Layers"]
    assert len(layers) == len(config["rootfs"]["diff_ids"])
    with tarfile.open(KERF_TAR) as archive:
        for name, diff_id in zip(layers, config["rootfs"]["diff_ids"], strict=True):
            digest = hashlib.sha256()
            stream = archive.extractfile(name)
            assert stream is not None
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
            assert f"sha256:{digest.hexdigest()}" == diff_id, name


@needs_image
def test_the_config_is_the_dockerfiles_final_stage(image: dict[str, Any]) -> None:
    config = image["config"]["config"]
    assert config["Entrypoint"] == json.loads(dockerfile("ENTRYPOINT")) == ["kerf"]
    assert config["Cmd"] == json.loads(dockerfile("CMD"))
    assert config["User"] == dockerfile("USER") == "65532:65532"
    assert config["WorkingDir"] == dockerfile("WORKDIR")
    env = dict(pair.split("=", 1) for pair in config["Env"])
    base = dict(pair.split("=", 1) for pair in BASE_CONFIG["Env"])
    for key, value in final_environment().items():
        assert env[key] == value.replace("$PATH", base["PATH"]), key
    assert env["PATH"].startswith("/opt/kerf/bin:")
    assert env["HOME"] == "/tmp" and env["PYTHONDONTWRITEBYTECODE"] == "1"


@needs_image
def test_kerf_runs_in_the_image_as_its_user(rootfs: Path, image: dict[str, Any]) -> None:
    config = image["config"]
    entrypoint, cmd = config["config"]["Entrypoint"], config["config"]["Cmd"]
    tag = image["manifest"]["RepoTags"][0].rpartition(":")[2]
    done = run_in(rootfs, config, *entrypoint, "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"kerf {tag}"), done.stderr
    # The image's default command.
    done = run_in(rootfs, config, *entrypoint, *cmd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kerf")
    for command in ("webhook", "reconciler", "recommend"):
        done = run_in(rootfs, config, *entrypoint, command, "--help")
        assert done.returncode == 0, done.stderr
        assert f"usage: kerf {command}" in done.stdout
    # Its runtime dependencies, on a root filesystem the user cannot write.
    done = run_in(
        rootfs, config, *entrypoint, "explain", "-f", "/examples/storefront", "-o", "text"
    )
    assert done.returncode == 0, done.stderr
    assert "shop/api-" in done.stdout
    probe = run_in(rootfs, config, "/usr/bin/touch", "/probe")
    assert probe.returncode != 0 and "Permission denied" in probe.stderr
    # Debian bookworm's Python, the same interpreter the build stage built against.
    done = run_in(rootfs, config, "/opt/kerf/bin/python", "--version")
    assert done.stdout.startswith("Python 3.11."), done.stdout + done.stderr


@needs_image
def test_the_image_runs_the_compiled_admission_path(rootfs: Path, image: dict[str, Any]) -> None:
    """setup.py's compiled build: each module it names is an extension in the image."""
    from setup import compiled_modules

    modules = compiled_modules()
    assert "app.decide.checks" in modules
    shown = "; ".join(f"import {m}; print({m}.__file__)" for m in modules)
    done = run_in(rootfs, image["config"], "/opt/kerf/bin/python", "-c", shown)
    assert done.returncode == 0, done.stderr
    files = done.stdout.split()
    assert len(files) == len(modules)
    assert all(f.startswith("/opt/kerf/lib/python3.11/site-packages/") for f in files), files
    assert all(f.endswith(".so") for f in files), files


@needs_image
def test_the_final_stage_holds_no_build_tool(rootfs: Path, image: dict[str, Any]) -> None:
    """Only the virtualenv crossed from the build stage: no compiler, no source tree, no
    test or dev tool, no pip in the virtualenv."""
    for path in ("usr/bin/gcc", "usr/bin/cc", "src", "opt/kerf/bin/pip"):
        assert not (rootfs / path).exists(), path
    probe = (
        "import importlib.util, sys; "
        "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))"
    )
    modules = (*TEST_ONLY, *DEV_TOOLS, "pip", "setuptools", *PRODUCT)
    done = run_in(rootfs, image["config"], "/opt/kerf/bin/python", "-c", probe, *modules)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == list(PRODUCT)


def test_names_are_normalized_as_containerd_does() -> None:
    assert docker_reference("kerf:0.1.0") == "docker.io/library/kerf:0.1.0"
    assert docker_reference("platform/kerf:1") == "docker.io/platform/kerf:1"
    for name in ("registry.example.com/platform/kerf:0.1.0", "localhost:5000/kerf:1"):
        assert docker_reference(name) == name


def test_the_build_context_is_what_the_dockerfile_copies() -> None:
    files = {str(path.relative_to(ROOT)) for path in context_files()}
    copied = {
        source.rstrip("/")
        for keyword, rest in stages()[0]
        if keyword == "COPY" and not rest.startswith("--from")
        for source in rest.split()[:-1]
    }
    # Each file under one COPY source: a top-level file or folder, or the install script.
    sources = {f if f.startswith("scripts/") else f.split("/")[0] for f in files}
    assert sources == copied
    assert "app/decide/checks.py" in files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)


def test_the_base_archive_is_one_layer_named_as_the_build_asks(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        info = tarfile.TarInfo("./etc/os-release")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"x=1\n"))
    write_base_archive(rootfs, tmp_path / "base.tar")
    with tarfile.open(tmp_path / "base.tar") as archive:

        def read(name: str) -> bytes:
            stream = archive.extractfile(name)
            assert stream is not None, name
            return stream.read()

        [entry] = json.loads(read("manifest.json"))
        config = json.loads(read(entry["Config"]))
        [layer] = entry["Layers"]
        assert read(layer) == rootfs.read_bytes()
    assert entry["RepoTags"] == [BASE_IMAGE]
    digest = hashlib.sha256(rootfs.read_bytes()).hexdigest()
    assert config["rootfs"]["diff_ids"] == [f"sha256:{digest}"]
    assert config["config"] == BASE_CONFIG
    assert (config["os"], config["architecture"]) == ("linux", host_arch())


def test_without_buildah_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    why = "buildah is not installed (make node-tools installs it with apt-get)"
    monkeypatch.setattr("devcluster.kerfimage.missing_tool", lambda: why)
    with pytest.raises(ComponentError, match="cannot build the kerf image: buildah is not"):
        build("kerf:0.1.0", tmp_path / "images")
    assert main(["--name", "kerf:0.1.0", "--out", str(tmp_path / "images")]) == 1
    assert capsys.readouterr().err == f"devcluster.kerfimage: cannot build the kerf image: {why}\n"
    assert not (tmp_path / "images").exists()
