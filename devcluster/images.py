"""The node images, pause and kerf-load, built without a registry: their Go programs
(devcluster/nodeimages) compiled here and packed as docker-archive tarballs that
`ctr -n k8s.io images import` takes. `python -m devcluster.images --out DIR`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from devcluster.processes import NODE_TARBALLS, ComponentError

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "devcluster" / "nodeimages"

# Fully qualified (a registry host with a dot, a tag): containerd stores an imported image
# under its normalized name and the CRI plugin looks images up by it, so a short name
# ("pause:1") would become docker.io/library/pause:1 and no longer match the pod's.
PAUSE_IMAGE = "kerf.local/pause:1"
LOAD_IMAGE = "kerf.local/kerf-load:1"
PAUSE_PATH = "/pause"
LOAD_PATH = "/usr/local/bin/kerf-load"
TARBALLS = dict(zip((PAUSE_IMAGE, LOAD_IMAGE), NODE_TARBALLS, strict=True))
STAMP = ".images.stamp"

#: The mtime of every entry and the images' creation time: the same inputs, the same bytes.
EPOCH = 0
#: The directories a container's runtime mounts over or writes in (tmp: sticky, world-writable).
BASE_DIRS = {"dev": 0o755, "etc": 0o755, "proc": 0o755, "sys": 0o755, "tmp": 0o1777}
#: Go's names for the machines this may run on; the image must say what the binaries are.
GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "ppc64le": "ppc64le"}
BUILD_TIMEOUT_S = 600
IMPORT_TIMEOUT_S = 120


def find_go() -> Path | None:
    """`$GO`, else `go` on PATH, else the official tarball's place; None when none is."""
    for candidate in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def _go() -> Path:
    go = find_go()
    if go is None:
        raise ComponentError("go is not installed (looked at $GO, PATH and /usr/local/go/bin)")
    return go


def host_arch() -> str:
    """This machine's architecture as Go and image configs name it."""
    machine = platform.machine()
    return GOARCH.get(machine, machine)


def build_binaries(out_dir: Path) -> dict[str, Path]:
    """Build `pause` and `kerf-load` into out_dir, static; program name -> path."""
    out_dir = out_dir.resolve()  # go runs in the module's directory
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": host_arch()}
    # -buildvcs=false: the repository's commit would otherwise be stamped into the binaries,
    # changing the images' bytes on every commit (and needing git).
    command = [
        str(_go()),
        "build",
        "-mod=readonly",
        "-trimpath",
        "-buildvcs=false",
        "-ldflags",
        "-s -w",
        "-o",
        f"{out_dir}{os.sep}",
        "./pause",
        "./kerf-load",
    ]
    result = subprocess.run(
        command, cwd=MODULE, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    if result.returncode != 0:
        raise ComponentError(
            f"go build of {MODULE.relative_to(ROOT)} failed (exit {result.returncode})",
            log_tail=result.stderr.strip(),
        )
    return {name: out_dir / name for name in ("pause", "kerf-load")}


def _tar_entry(
    name: str, mode: int, kind: bytes = tarfile.REGTYPE, size: int = 0
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = EPOCH
    return info


def _layer(files: Mapping[str, Path], links: Mapping[str, str] | None = None) -> bytes:
    """One layer: the base directories, each file's (and link's) parent directories, the
    files and the symbolic links (path -> target)."""
    entries: dict[str, Path | int | str] = dict(BASE_DIRS)
    for target, source in [*files.items(), *(links or {}).items()]:
        relative = target.lstrip("/")
        parent = os.path.dirname(relative)
        while parent:
            entries.setdefault(parent, 0o755)
            parent = os.path.dirname(parent)
        entries[relative] = source
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(entries):
            entry = entries[name]
            if isinstance(entry, int):
                tar.addfile(_tar_entry(name, entry, tarfile.DIRTYPE))
            elif isinstance(entry, str):
                link = _tar_entry(name, 0o777, tarfile.SYMTYPE)
                link.linkname = entry
                tar.addfile(link)
            else:
                data = entry.read_bytes()
                tar.addfile(_tar_entry(name, 0o755, size=len(data)), io.BytesIO(data))
    return buffer.getvalue()


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_image(
    tar_path: Path,
    name: str,
    files: Mapping[str, Path],
    entrypoint: list[str],
    *,
    architecture: str | None = None,
    links: Mapping[str, str] | None = None,
    also: Sequence[str] = (),
) -> None:
    """Write a docker-archive tarball (`docker save`'s format) of one image: the files at
    the given paths in one layer, mode 0755, and the symbolic links; deterministic. `also`:
    more names (RepoTags) for the same image."""
    layer = _layer(files, links)
    layer_hex = hashlib.sha256(layer).hexdigest()
    created = "1970-01-01T00:00:00Z"
    config = _json(
        {
            "architecture": architecture or host_arch(),
            "os": "linux",
            "created": created,
            "config": {
                "Entrypoint": entrypoint,
                "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
                "WorkingDir": "/",
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]},
            "history": [{"created": created, "created_by": "devcluster/images.py"}],
        }
    )
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    layer_name = f"{layer_hex}/layer.tar"
    manifest = _json([{"Config": config_name, "RepoTags": [name, *also], "Layers": [layer_name]}])
    members = {
        f"{layer_hex}/": None,
        config_name: config,
        layer_name: layer,
        "manifest.json": manifest,
    }

    tar_path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside then renamed: an interrupted build leaves no half tarball behind.
    with tempfile.NamedTemporaryFile(dir=tar_path.parent, prefix=".image-", delete=False) as out:
        try:
            with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for member in sorted(members):
                    data = members[member]
                    if data is None:
                        tar.addfile(_tar_entry(member, 0o755, tarfile.DIRTYPE))
                    else:
                        tar.addfile(_tar_entry(member, 0o644, size=len(data)), io.BytesIO(data))
        except BaseException:
            os.unlink(out.name)
            raise
    os.chmod(out.name, 0o644)
    os.replace(out.name, tar_path)


def inputs_hash() -> str:
    """A hash of what the images are made from: the Go sources, go.mod, this file and the
    Go toolchain's version."""
    sources = [MODULE / "go.mod", Path(__file__).resolve(), *MODULE.rglob("*.go")]
    digest = hashlib.sha256()
    for path in sorted(sources):
        file_hash = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{file_hash}  {path.relative_to(ROOT)}\n".encode())
    version = subprocess.run(
        [str(_go()), "version"], capture_output=True, text=True, check=True, timeout=60
    )
    digest.update(version.stdout.encode())
    return digest.hexdigest()


def build_all(out_dir: Path) -> dict[str, Path]:
    """Both images into out_dir (image name -> tarball). Cached: while out_dir's stamp
    holds the inputs' hash and the tarballs are there, nothing is rebuilt."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tarballs = {name: out_dir / file for name, file in TARBALLS.items()}
    stamp = out_dir / STAMP
    digest = inputs_hash()
    if (
        stamp.is_file()
        and stamp.read_text().strip() == digest
        and all(path.is_file() for path in tarballs.values())
    ):
        return tarballs
    stamp.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as scratch:
        binaries = build_binaries(Path(scratch))
        write_image(
            tarballs[PAUSE_IMAGE], PAUSE_IMAGE, {PAUSE_PATH: binaries["pause"]}, [PAUSE_PATH]
        )
        write_image(
            tarballs[LOAD_IMAGE], LOAD_IMAGE, {LOAD_PATH: binaries["kerf-load"]}, [LOAD_PATH]
        )
    stamp.write_text(digest + "\n")
    return tarballs


def import_images(
    ctr: Path, address: Path, tarballs: Iterable[Path], snapshotter: str = "overlayfs"
) -> None:
    """Import the tarballs into containerd's k8s.io namespace (the CRI plugin's), unpacked
    into `snapshotter`, which must be the CRI plugin's for its containers to start.

    ctr imports, and unpacks, only the content for this machine's platform by default,
    which is the platform the images are built for."""
    for tarball in tarballs:
        command = [
            str(ctr),
            "--address",
            str(address),
            "--namespace",
            "k8s.io",
            "images",
            "import",
            "--snapshotter",
            snapshotter,
            str(tarball),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            last = output.splitlines()[-1] if output else "no output"
            raise ComponentError(
                f"ctr images import {tarball} failed (exit {result.returncode}): {last}",
                log_tail=output,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.images",
        description="Build the node images (pause, kerf-load) as docker-archive tarballs.",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for the tarballs")
    args = parser.parse_args(argv)
    try:
        tarballs = build_all(args.out)
    except ComponentError as exc:
        print(f"devcluster.images: {exc}", file=sys.stderr)
        if exc.log_tail:
            print(exc.log_tail, file=sys.stderr)
        return 1
    for name, path in tarballs.items():
        print(f"{name} {path} {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
