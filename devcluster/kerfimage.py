"""The kerf image, built from the project's Dockerfile without a daemon or a registry, as a
docker-archive tarball that `ctr -n k8s.io images import` takes (the node images' format).
`python -m devcluster.kerfimage --name kerf:0.1.0 --out DIR`; root, with buildah and
mmdebstrap (`make node-tools` installs both).

The Dockerfile's base, `python:3.11-slim-bookworm`, is on Docker Hub, which this machine
cannot reach; its `ARG PYTHON_IMAGE` takes a base made here instead:

1. the base: Debian bookworm by mmdebstrap (variant `apt`) with bookworm's Python 3.11
   (`python3`, `python3-venv`, `python3-pip`) and its headers (`libpython3.11-dev`, which
   mypyc's compile in the build stage needs, as the official image holds them), as one
   rootfs tarball wrapped here into a one-layer docker-archive named BASE_IMAGE;
2. the image: `buildah build` of the unchanged Dockerfile over that base (`--build-arg
   PYTHON_IMAGE=BASE_IMAGE`), rootful, chroot isolation, the storage under the work
   directory; its build stage installs gcc with apt-get from Debian's mirror as it would
   over the official base. Pushed as `docker-archive:DIR/kerf.tar`.

Each step is cached by a stamp over its inputs: the base's over its recipe (the mmdebstrap
command, the config and mmdebstrap's version), the image's over the base's, the Dockerfile,
the build context (.dockerignore's `!` entries, as the Dockerfile copies them), the name,
this file and buildah's version. The buildah storage is deleted after every build.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from devcluster.images import host_arch
from devcluster.processes import ComponentError

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

#: What the Dockerfile's ARG PYTHON_IMAGE is set to here (fully qualified, never pulled).
BASE_IMAGE = "kerf.local/python:3.11-bookworm"
TARBALL = "kerf.tar"
STAMP = ".kerf-image.stamp"
BASE_TARBALL = "base.tar"
BASE_STAMP = ".base.stamp"
#: The tarballs written aside before their rename: no `.tar` suffix, so that nothing
#: globbing `*.tar` (devcluster.processes.find_images) sees half a file.
PARTIAL = ".partial"

SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
#: Python 3.11 as the official image has it: the interpreter, venv (ensurepip), pip, and
#: the headers mypyc compiles against.
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "libpython3.11-dev")
BASE_OPTIONS = (
    "--variant=apt",
    # /bin, /lib... as symlinks into /usr, set up directly: the `usrmerge` package would
    # bring in perl (50 MB).
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    '--aptopt=Acquire::Languages "none"',
    # No fsync per file (a throwaway root; Docker's Debian images set the same).
    "--dpkgopt=force-unsafe-io",
    # What a container never reads, kept out as the slim images keep it out (dpkg's
    # filters stay in the image, so the build stage's apt-get honours them too).
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    # libpython's static archives (25 MB): extensions link to no libpython on Debian.
    "--dpkgopt=path-exclude=/usr/lib/python3.11/config-3.11-*/libpython3.11*.a",
)
#: The base's config: Debian's PATH (the Dockerfile's `ENV PATH=/opt/kerf/bin:$PATH`
#: extends it) and the official image's LANG.
BASE_CONFIG = {
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
    "Cmd": ["python3"],
}
#: The host's trust store, bind-mounted over the image's during the RUN steps only (never
#: committed): pip in the build stage then reaches PyPI through whatever TLS proxy the host
#: trusts (this machine's egress has one). A bookworm store holds no more than Debian's.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: containers/image's blob-info cache for root, which buildah writes whatever --root says.
BLOB_INFO_CACHE = Path("/var/lib/containers")
STORAGE_DRIVER = "overlay"
BASE_TIMEOUT_S = 1200
BUILD_TIMEOUT_S = 3600
STEP_TIMEOUT_S = 300


def missing_tool() -> str:
    """Why the image cannot be built here ('' when it can)."""
    if os.geteuid() != 0:
        return "not root (mmdebstrap and a rootful buildah need root)"
    for tool in ("mmdebstrap", "buildah"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make node-tools installs it with apt-get)"
    return ""


def docker_reference(name: str) -> str:
    """`name` as containerd and the CRI plugin normalize it: `kerf:0.1.0` is
    `docker.io/library/kerf:0.1.0`, which a pod's `image: kerf:0.1.0` resolves to."""
    first, slash, _ = name.partition("/")
    if not slash:
        return f"docker.io/library/{name}"
    if "." in first or ":" in first or first == "localhost":
        return name
    return f"docker.io/{name}"


def base_command(rootfs: Path) -> list[str]:
    return [
        "mmdebstrap",
        *BASE_OPTIONS,
        f"--include={','.join(BASE_PACKAGES)}",
        SUITE,
        str(rootfs),
        *MIRRORS,
    ]


def _version(tool: str) -> str:
    done = subprocess.run(
        [tool, "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def base_digest() -> str:
    """A hash of the base's recipe: the mmdebstrap command, the config, mmdebstrap's
    version. Debian's updates to the same packages do not change it (delete the work
    directory's base.tar to take them)."""
    recipe = {
        "command": base_command(Path("ROOTFS")),
        "config": BASE_CONFIG,
        "name": BASE_IMAGE,
        "mmdebstrap": _version("mmdebstrap"),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def context_files() -> list[Path]:
    """The build context, as .dockerignore lets it through: its `!` entries (what the
    Dockerfile copies; tests/test_image.py checks they agree), without byte code."""
    files: list[Path] = []
    for line in DOCKERIGNORE.read_text().splitlines():
        if not line.startswith("!"):
            continue
        path = ROOT / line.removeprefix("!").rstrip("/")
        entries = sorted(path.rglob("*")) if path.is_dir() else [path]
        files += [
            p
            for p in entries
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        ]
    return files


def image_digest(name: str, base: str) -> str:
    """A hash of what the image is made from: the base's recipe, the Dockerfile, the build
    context, the name, this file and buildah's version."""
    digest = hashlib.sha256()
    digest.update(f"{base}\n{name}\n{_version('buildah')}\n".encode())
    for path in sorted({DOCKERFILE, Path(__file__).resolve(), *context_files()}):
        file_hash = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{file_hash}  {path.relative_to(ROOT)}\n".encode())
    return digest.hexdigest()


def _stamped(stamp: Path, digest: str, *outputs: Path) -> bool:
    return (
        stamp.is_file()
        and stamp.read_text().strip() == digest
        and all(path.is_file() for path in outputs)
    )


def _run(
    command: list[str], log: Path, what: str, timeout: float, env: dict[str, str] | None = None
) -> None:
    """Run `command`, its output appended to `log`; ComponentError naming `what` (with the
    log's last lines) when it fails."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                env=env,
            )
        except subprocess.TimeoutExpired as exc:
            raise ComponentError(f"{what} took over {timeout:.0f} s (log: {log})") from exc
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise ComponentError(f"{what} failed (exit {done.returncode}; log: {log})", tail)


def _tar_entry(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = 0
    return info


def write_base_archive(rootfs: Path, out: Path) -> None:
    """A docker-archive of one image, BASE_IMAGE: the rootfs tarball as its one layer."""
    layer_hash = hashlib.sha256()
    with rootfs.open("rb") as source:
        while chunk := source.read(1 << 20):
            layer_hash.update(chunk)
    layer_hex = layer_hash.hexdigest()
    created = "1970-01-01T00:00:00Z"
    config = json.dumps(
        {
            "architecture": host_arch(),
            "os": "linux",
            "created": created,
            "config": BASE_CONFIG,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]},
            "history": [{"created": created, "created_by": "devcluster/kerfimage.py: mmdebstrap"}],
        },
        sort_keys=True,
    ).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    layer_name = f"{layer_hex}/layer.tar"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": [BASE_IMAGE], "Layers": [layer_name]}]
    ).encode()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tar_entry(config_name, len(config)), io.BytesIO(config))
        with rootfs.open("rb") as layer:
            tar.addfile(_tar_entry(layer_name, rootfs.stat().st_size), layer)
        tar.addfile(_tar_entry("manifest.json", len(manifest)), io.BytesIO(manifest))


def build_base(work: Path) -> tuple[Path, str]:
    """The base's docker-archive in `work` and its recipe's hash; cached by a stamp."""
    tarball, stamp = work / BASE_TARBALL, work / BASE_STAMP
    digest = base_digest()
    if _stamped(stamp, digest, tarball):
        return tarball, digest
    stamp.unlink(missing_ok=True)
    log = work / "base.log"
    log.write_text("")
    print(f"kerf image: the base {BASE_IMAGE} (mmdebstrap; log {log})", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=work, prefix=".base-") as scratch:
        rootfs = Path(scratch) / "rootfs.tar"
        # mmdebstrap's chroot in the scratch directory, not /tmp.
        env = {**os.environ, "TMPDIR": scratch}
        _run(base_command(rootfs), log, "mmdebstrap", BASE_TIMEOUT_S, env=env)
        partial = work / (BASE_TARBALL + PARTIAL)
        write_base_archive(rootfs, partial)
        os.replace(partial, tarball)
    stamp.write_text(digest + "\n")
    return tarball, digest


def mounts_under(path: Path) -> list[str]:
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(path) or p.startswith(f"{path}/")]


def remove_storage(storage: Path) -> None:
    """Delete buildah's storage, unmounting first whatever a killed build left mounted."""
    libc = ctypes.CDLL(None, use_errno=True)
    for point in reversed(mounts_under(storage)):
        libc.umount2(point.encode(), 2)  # MNT_DETACH
    shutil.rmtree(storage, ignore_errors=True)
    if storage.exists():
        raise ComponentError(f"could not delete buildah's storage {storage}")


@contextlib.contextmanager
def buildah_storage(work: Path) -> Iterator[list[str]]:
    """buildah's command with its storage (root, run root, big temp files) under
    `work/storage`, deleted at exit; and containers/image's blob-info cache, which buildah
    writes under /var/lib/containers whatever its root, deleted when this made it."""
    storage = work / "storage"
    remove_storage(storage)
    (storage / "tmp").mkdir(parents=True)
    had_cache = BLOB_INFO_CACHE.exists()
    try:
        yield [
            "buildah",
            "--root",
            str(storage / "root"),
            "--runroot",
            str(storage / "run"),
            "--storage-driver",
            STORAGE_DRIVER,
        ]
    finally:
        remove_storage(storage)
        if not had_cache:
            shutil.rmtree(BLOB_INFO_CACHE, ignore_errors=True)


def build_image(name: str, base: Path, out: Path, work: Path) -> None:
    """`buildah build` of the Dockerfile over `base`, pushed as a docker-archive to `out`."""
    reference = docker_reference(name)
    log = work / "build.log"
    log.write_text("")
    print(f"kerf image: {reference} (buildah build; log {log})", file=sys.stderr)
    with buildah_storage(work) as buildah:
        env = {**os.environ, "TMPDIR": str(work / "storage" / "tmp")}
        _run(
            [*buildah, "pull", "--quiet", f"docker-archive:{base}"],
            log,
            "buildah pull of the base",
            STEP_TIMEOUT_S,
            env=env,
        )
        mounts = []
        if HOST_CA_BUNDLE.is_file():
            mounts = ["--volume", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"]
        _run(
            [
                *buildah,
                "build",
                "--isolation",
                "chroot",
                "--pull=never",
                "--layers=false",
                *mounts,
                "--build-arg",
                f"PYTHON_IMAGE={BASE_IMAGE}",
                "--file",
                str(DOCKERFILE),
                "--tag",
                reference,
                str(ROOT),
            ],
            log,
            "buildah build",
            BUILD_TIMEOUT_S,
            env=env,
        )
        partial = out.with_name(out.name + PARTIAL)
        partial.unlink(missing_ok=True)
        _run(
            [*buildah, "push", "--quiet", reference, f"docker-archive:{partial}:{reference}"],
            log,
            "buildah push",
            STEP_TIMEOUT_S,
            env=env,
        )
        os.chmod(partial, 0o644)
        os.replace(partial, out)


def build(name: str, out_dir: Path, work: Path | None = None) -> Path:
    """The kerf image's tarball, out_dir/kerf.tar; cached: while its stamp holds the inputs'
    hash and the tarball is there, nothing is rebuilt. `work` (default: out_dir's sibling
    kerf-image) keeps the base's tarball and the logs."""
    why = missing_tool()
    if why:
        raise ComponentError(f"cannot build the kerf image: {why}")
    out_dir.mkdir(parents=True, exist_ok=True)
    work = (work or out_dir.parent / "kerf-image").resolve()
    work.mkdir(parents=True, exist_ok=True)
    tarball = out_dir / TARBALL
    with (work / ".lock").open("w") as lock:
        # One build at a time (.tools may be shared by several work trees).
        fcntl.flock(lock, fcntl.LOCK_EX)
        base, base_hash = build_base(work)
        stamp = out_dir / STAMP
        digest = image_digest(name, base_hash)
        if _stamped(stamp, digest, tarball):
            return tarball
        stamp.unlink(missing_ok=True)
        build_image(name, base, tarball, work)
        stamp.write_text(digest + "\n")
    return tarball


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.kerfimage",
        description="Build the kerf image from the Dockerfile with buildah, as a docker-archive.",
    )
    parser.add_argument("--name", required=True, help="the image's name (make image-name)")
    parser.add_argument("--out", type=Path, required=True, help="directory for kerf.tar")
    parser.add_argument(
        "--work", type=Path, help="the base's tarball and the logs (default: OUT/../kerf-image)"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        tarball = build(args.name, args.out, args.work)
    except ComponentError as exc:
        print(f"devcluster.kerfimage: {exc}", file=sys.stderr)
        if exc.log_tail:
            print(exc.log_tail, file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(f"{docker_reference(args.name)} {tarball} {tarball.stat().st_size} bytes ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
