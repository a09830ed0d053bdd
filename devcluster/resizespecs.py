"""Kubernetes' own in-place resize specs against devcluster:
`python -m devcluster.resizespecs --kubelet real|agent [--out DIR]`.

It builds the image the specs run (busybox, under the name the test binary's
`--list-images` prints), starts `python -m devcluster` (a real node imports the image at
start), runs `.tools/bin/e2e-resize.test` (scripts/build-e2e-resize.sh, `make
conformance-resize`) with `--provider=local` and the kubeconfig on the specs of
test/e2e/common/node/pod_resize.go and test/e2e/node/pod_resize.go, less the ones that
cannot pass here (SKIPS, each with its reason; docs/devcluster.md lists them), prints
ginkgo's summary and stops devcluster. Exit 0 when ginkgo passed, 1 when a spec failed or
devcluster did not start, 2 when something it needs is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devcluster import realnode
from devcluster.images import write_image
from devcluster.processes import tools_dir

ROOT = Path(__file__).resolve().parents[1]
BINARY = "e2e-resize.test"
#: Every spec of both files is under this name ("Pod InPlace Resize Container",
#: "... (scheduler-focused)", "... (deferred-resizes)", "... (resource-quota)",
#: "... (limit-ranger)").
FOCUS = r"Pod InPlace Resize Container"

#: Specs that cannot pass on a real devcluster node, each a regular expression on the
#: spec's full text (Go's RE2, as ginkgo matches: no look-ahead) and why. Only two reasons are allowed here: the spec needs cgroup v2
#: (the machine has cgroup v1) or a feature gate that is off in 1.35.
SKIPS: Mapping[str, str] = {}

#: Specs that cannot pass where root lacks CAP_SYS_RESOURCE (these machines): after a
#: resize restarts a Guaranteed container, they read its oom_score_adj and expect the
#: kubelet's -997. Lowering oom_score_adj takes CAP_SYS_RESOURCE; without it containerd's
#: `restrict_oom_score_adj` (which the real node needs for any sandbox to start,
#: devcluster/realnode.py) keeps containerd's own value, 0. Skipped only where the
#: capability is missing.
_OOM_WHY = (
    "a Guaranteed container restarted by its resize policy must have oom_score_adj -997; "
    "without CAP_SYS_RESOURCE it keeps containerd's 0"
)
OOM_SCORE_SKIPS: Mapping[str, str] = {
    r"guaranteed qos - 1 container with resize policy cpu & mem restart( \+ resize "
    r"initContainers)? resizing (cpu|mem|cpu & mem in the same direction|cpu & mem in "
    r"opposite directions)$": _OOM_WHY,
    r"guaranteed qos - 1 container with resize policy cpu restart resizing (cpu|cpu & mem in "
    r"the same direction|cpu & mem in opposite directions)$": _OOM_WHY,
    r"guaranteed qos - 1 container with resize policy mem restart resizing (mem|cpu & mem in "
    r"the same direction|cpu & mem in opposite directions)$": _OOM_WHY,
}

#: Specs that fail on the node agent (the agent's known distance from a kubelet), with
#: why; skipped with --kubelet agent so that that run checks the rest.
_EXEC_WHY = (
    "reads the container's cgroup files through exec once the pod runs (and after each "
    "resize): the agent runs no container, so there is no cgroup and no exec"
)
AGENT_FAILS: Mapping[str, str] = {
    r"Pod InPlace Resize Container (guaranteed|burstable) ": _EXEC_WHY,
    r"Pod InPlace Resize Container (resize pod via the replace endpoint|decrease memory limit "
    r"below usage)": _EXEC_WHY,
    # all but "Burstable pod - nonrestartable initContainer", whose pod is never waited for
    r"apply invalid resize patch requests (BestEffort pod|Guaranteed pod|Burstable pod - "
    r"(remove|reorder|resize|set) )": _EXEC_WHY,
    r"\(limit-ranger\) .* valid (increase|decrease) ": _EXEC_WHY,
    r"\(resource-quota\) .* valid increase ": _EXEC_WHY,
    r"\((scheduler-focused|deferred-resizes)\) ": (
        "the agent's answers (Deferred, then applied once room frees) are the kubelet's, "
        "and then " + _EXEC_WHY
    ),
}

#: CAP_SYS_RESOURCE's bit in /proc/self/status's CapEff
_CAP_SYS_RESOURCE = 24


def can_lower_oom_score_adj() -> bool:
    """Whether this process (root, as the real node runs) has CAP_SYS_RESOURCE."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> _CAP_SYS_RESOURCE & 1)
    return False


#: The image the specs' containers run (test/e2e/common/node/framework/cgroups):
#: imageutils.BusyBox. Built here from Debian's busybox-static (`make node-tools`).
BUSYBOX_REPO = "/e2e-test-images/busybox:"
BUSYBOX = Path("/bin/busybox")

START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
#: the whole ginkgo run; ginkgo's own default (--ginkgo.timeout) is 1h
RUN_TIMEOUT_S = 3600.0

EXIT_FAILED = 1
EXIT_MISSING = 2


class Missing(Exception):
    """Something the run needs is not there; the message says what and how to get it."""


@dataclass
class Summary:
    """Ginkgo's summary of one run."""

    ran: int
    total: int
    seconds: float
    passed: int
    failed: int
    pending: int
    skipped: int
    flaked: int = 0
    success: bool = False
    #: the failed specs' texts, from "Summarizing N Failures"
    failures: list[str] = field(default_factory=list)

    @property
    def lines(self) -> str:
        """The two lines ginkgo prints."""
        verdict = "SUCCESS!" if self.success else "FAIL!"
        flaked = f" | {self.flaked} Flaked" if self.flaked else ""
        return (
            f"Ran {self.ran} of {self.total} Specs in {self.seconds:.3f} seconds\n"
            f"{verdict} -- {self.passed} Passed | {self.failed} Failed{flaked} | "
            f"{self.pending} Pending | {self.skipped} Skipped"
        )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAN = re.compile(r"^Ran (\d+) of (\d+) Specs? in ([\d.]+) seconds$", re.M)
_VERDICT = re.compile(
    r"^(SUCCESS!|FAIL!) -- (\d+) Passed \| (\d+) Failed(?: \| (\d+) Flaked)? \| "
    r"(\d+) Pending \| (\d+) Skipped",
    re.M,
)
_FAILURE = re.compile(r"^\s*\[(?:FAIL|PANICKED|TIMEDOUT|INTERRUPTED)\] (.+)$")
#: where ginkgo marks the node that failed ("... resizing [It] cpu"), and the labels it adds
_NODE_MARK = re.compile(r"\[(?:It|BeforeEach|AfterEach|JustBeforeEach|DeferCleanup[^]]*)\] ")


def parse_summary(output: str) -> Summary | None:
    """Ginkgo's summary from a run's output (colours or not); None when there is none
    (the run did not get that far)."""
    text = _ANSI.sub("", output)
    ran = _RAN.search(text)
    verdict = _VERDICT.search(text)
    if ran is None or verdict is None:
        return None
    failures: list[str] = []
    marker = re.search(r"^Summarizing \d+ Failures?:$", text, re.M)
    if marker is not None:
        for line in text[marker.end() : ran.start()].splitlines():
            found = _FAILURE.match(line)
            if found:
                failures.append(_NODE_MARK.sub("", found.group(1)).strip())
    return Summary(
        ran=int(ran.group(1)),
        total=int(ran.group(2)),
        seconds=float(ran.group(3)),
        passed=int(verdict.group(2)),
        failed=int(verdict.group(3)),
        flaked=int(verdict.group(4) or 0),
        pending=int(verdict.group(5)),
        skipped=int(verdict.group(6)),
        success=verdict.group(1) == "SUCCESS!",
        failures=failures,
    )


def skips(kubelet: str) -> dict[str, str]:
    """The specs skipped in this mode (pattern -> why): SKIPS, OOM_SCORE_SKIPS on a real
    node without CAP_SYS_RESOURCE, and AGENT_FAILS with the agent."""
    chosen = dict(SKIPS)
    if kubelet == "real" and not can_lower_oom_score_adj():
        chosen.update(OOM_SCORE_SKIPS)
    if kubelet == "agent":
        chosen.update(AGENT_FAILS)
    return chosen


def skip_regex(kubelet: str) -> str:
    """--ginkgo.skip for this mode ('' when nothing is skipped)."""
    return "|".join(f"(?:{p})" for p in skips(kubelet))


def find_binary() -> Path:
    path = tools_dir() / BINARY
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise Missing(
            f"{path} is missing; run make conformance-resize (or scripts/build-e2e-resize.sh)"
        )
    return path


def list_images(binary: Path) -> list[str]:
    """The images the binary names (`--list-images`), one a line."""
    result = subprocess.run(
        [str(binary), "--list-images"], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        raise Missing(f"{binary} --list-images failed (exit {result.returncode}): {result.stderr}")
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def busybox_names(images: list[str]) -> list[str]:
    """Every busybox the binary names: the specs' (imageutils.BusyBox) and the one the
    CSI manifests it embeds name; the image is tagged with each."""
    names = sorted(name for name in images if BUSYBOX_REPO in name)
    if not names:
        raise Missing(f"--list-images names no {BUSYBOX_REPO}* image")
    return names


def busybox_applets() -> list[str]:
    result = subprocess.run(
        [str(BUSYBOX), "--list"], capture_output=True, text=True, check=True, timeout=30
    )
    return sorted({a for a in result.stdout.split() if a and a != "busybox"})


def build_busybox(names: list[str], out_dir: Path) -> Path:
    """The e2e busybox image as a docker-archive tarball in out_dir, under each name:
    Debian's static busybox at /bin/busybox and a link to it for each applet in /bin."""
    if not BUSYBOX.is_file():
        raise Missing(f"{BUSYBOX} is missing; run make node-tools (Debian's busybox-static)")
    links = {f"/bin/{applet}": "busybox" for applet in busybox_applets()}
    tarball = out_dir / "e2e-busybox.tar"
    files = {"/bin/busybox": BUSYBOX}
    write_image(tarball, names[0], files, ["/bin/sh"], links=links, also=names[1:])
    return tarball


@contextlib.contextmanager
def devcluster(kubelet: str, workdir: Path, images: list[Path]) -> Iterator[Path]:
    """`python -m devcluster` until the block ends (SIGTERM to it, which stops and cleans
    up everything it started); the kubeconfig."""
    kubeconfig = workdir / "kubeconfig"
    argv = [sys.executable, "-m", "devcluster", "--kubeconfig", str(kubeconfig)]
    argv += ["--kubelet", kubelet]
    for image in images:
        argv += ["--image", str(image)]
    log_path = workdir / "devcluster.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        serving = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                log.flush()
                if "serving on" in line:
                    print(line.rstrip("\n"), flush=True)
                    serving.set()
            serving.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            if not serving.wait(START_TIMEOUT_S) or process.poll() is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(STOP_TIMEOUT_S)
                reader.join(10)
                tail = log_path.read_text().strip().splitlines()[-20:]
                raise RuntimeError("devcluster did not start:\n" + "\n".join(tail))
            yield kubeconfig
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            reader.join(10)


def ginkgo_argv(
    binary: Path, kubeconfig: Path, kubelet: str, out: Path, narrow: str = ""
) -> list[str]:
    """The test binary's command line; `narrow` (a regular expression) picks among the
    resize specs."""
    focus = f"{FOCUS}.*(?:{narrow})" if narrow else FOCUS
    argv = [
        str(binary),
        "--provider=local",
        f"--kubeconfig={kubeconfig}",
        f"--report-dir={out}",
        f"--ginkgo.focus={focus}",
        "--ginkgo.no-color",
        "--ginkgo.v",
        # One spec at a time: the node is this machine's, and the serial specs fill it.
        "--ginkgo.timeout=1h",
    ]
    skip = skip_regex(kubelet)
    if skip:
        argv.append(f"--ginkgo.skip={skip}")
    return argv


def run(kubelet: str, out: Path, narrow: str = "") -> int:
    binary = find_binary()
    out.mkdir(parents=True, exist_ok=True)
    images: list[Path] = []
    if kubelet == "real":
        why = realnode.tools_missing()
        if why:
            raise Missing(f"no real node here: {why}")
        images.append(build_busybox(busybox_names(list_images(binary)), out))
    skipped = skips(kubelet)
    for pattern, why in skipped.items():
        print(f"resizespecs: skipping {pattern}: {why}", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="resizespecs-") as scratch:
        workdir = Path(scratch)
        with devcluster(kubelet, workdir, images) as kubeconfig:
            up_s = time.monotonic() - started
            argv = ginkgo_argv(binary, kubeconfig, kubelet, out, narrow)
            log_path = out / f"e2e-{kubelet}.log"
            with log_path.open("w") as log:
                result = subprocess.run(
                    argv, stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S, cwd=out
                )
        shutil.copy(workdir / "devcluster.log", out / f"devcluster-{kubelet}.log")
    wall_s = time.monotonic() - started
    summary = parse_summary(log_path.read_text(errors="replace"))
    if summary is None:
        print(f"resizespecs: no ginkgo summary (exit {result.returncode}); see {log_path}")
        return EXIT_FAILED
    print(summary.lines)
    for failure in summary.failures:
        print(f"  failed: {failure}")
    print(
        f"resizespecs: --kubelet {kubelet}: {summary.passed} of {summary.ran} specs passed; "
        f"devcluster up in {up_s:.0f} s, {wall_s:.0f} s in all; log {log_path}",
        flush=True,
    )
    return 0 if summary.success and result.returncode == 0 else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.resizespecs",
        description="Run Kubernetes' in-place resize e2e specs against devcluster.",
    )
    parser.add_argument("--kubelet", choices=("real", "agent"), required=True)
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / ".tools" / "conformance-resize",
        help="where the image, the logs and ginkgo's reports go",
    )
    parser.add_argument(
        "--focus",
        default="",
        metavar="REGEX",
        help="run only the resize specs whose text also matches this",
    )
    args = parser.parse_args(argv)
    try:
        return run(args.kubelet, args.out.resolve(), args.focus)
    except Missing as exc:
        print(f"resizespecs: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except RuntimeError as exc:
        print(f"resizespecs: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
