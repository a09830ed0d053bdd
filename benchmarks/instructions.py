"""`make bench-instructions`: the instructions of one admission answer, counted by callgrind.

The webhook bench's figures move by up to ±20 % between identical runs on a shared
machine, more than most changes to the admission path do. This bench counts the work
itself: it calls the webhook's app in process (the ASGI app as uvicorn calls it, without
TLS or HTTP, with the bench's no-ops added) under valgrind's callgrind, and counts the
instructions per answer of four loads:

- `/noop` over the one template: the bench's plain ASGI no-op, the floor under /mutate;
- `/fastapi-noop` over the one template: the same no-op as a FastAPI endpoint, the
  baseline the webhook bench's targets are stated against;
- memo hits: `/mutate` over one template (a pod that gets a patch), again and again;
- fresh decisions: `/mutate` over templates the memo has never seen, of workloads whose
  plans are kept (every body answered twice before, then each one's first container given
  one more environment variable): every answer is a decision, as in the webhook bench's
  second load, without the plan builds of a first answer.

Each load runs inside a C function that nothing else in the process calls
(`deque.extend`, `deque.extendleft`, `bytearray.extend`, `array.extend`), and callgrind
counts inside those alone (`--toggle-collect`): building the view and the warm-up are not
counted. The counts repeat to within a fraction of a percent, so two commits compare on
any machine. They leave out what instructions do not show: cache misses, the kernel, TLS
and the server's HTTP; the webhook bench measures those. Nor do they show what the CPU's own
instructions for a task save: valgrind's CPU has no SHA extensions, so OpenSSL hashes in
plain instructions there.

The view is smaller than the webhook bench's (3,000 workloads by default, not 25,000):
under callgrind the process runs about fifty times slower, and a decision reads its
workload's plan, not the whole view.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.figures import add_size_arguments, decision_build, write_figures

#: the C function each load runs inside, so that callgrind counts it apart
LOADS = {
    "noop": "bytearray_extend",
    "fastapi_noop": "array_array_extend",
    "hits": "deque_extendleft",
    "fresh": "deque_extend",
}
#: the loads of /mutate, and those of the no-ops it is compared with
_MUTATE = ("hits", "fresh")
_NOOPS = ("noop", "fastapi_noop")
#: the flags the counted child is run with, as the parent got them
_SIZES = ("workloads", "nodes", "policies", "namespaces", "answers")
_INCLUSIVE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+\S*?:(\w+)(?:'\d+)?\s")


def fresh_variant(body: bytes) -> bytes:
    """`body` with one more environment variable in its pod's first container: a template
    the memo has not seen, of the same workload and with the same decision inputs."""
    review = orjson.loads(body)
    container = review["request"]["object"]["spec"]["containers"][0]
    container["env"] = [*(container.get("env") or []), {"name": "KERF_BENCH", "value": "1"}]
    return orjson.dumps(review)


def run_loads(args: argparse.Namespace) -> dict[str, Any]:
    """Build the view and the app, warm them up, then run the four loads, each inside its
    own C function; returns what the loads answered, to check that each measured what it
    claims."""
    from app.decide.admission import memo_counts
    from benchmarks.explain import NOW
    from benchmarks.noop import with_noop
    from benchmarks.webhook import build_bodies, build_view
    from webhook.logs import DecisionLog
    from webhook.server import create_app

    view, deployments = build_view(args)
    bodies = build_bodies(deployments, args.answers)
    fresh = [fresh_variant(b) for b in bodies]
    with open("/dev/null", "w") as devnull:
        app = with_noop(create_app(view, clock=lambda: NOW, decision_log=DecisionLog(devnull)))
        answer = _caller(app)
        checks: dict[str, Any] = {}

        def counted(name: str, path: str, load: Sequence[bytes], run: Callable[..., Any]) -> None:
            hits, misses = memo_counts(view)
            patched = 0

            def one(body: bytes) -> int:
                nonlocal patched
                patched += b'"patch"' in answer(path, body)
                return 0

            run(map(one, load))
            checks[name] = {
                "answers": len(load),
                "with_patch": patched,
                "memo_hits": memo_counts(view)[0] - hits,
                "memo_misses": memo_counts(view)[1] - misses,
            }

        async def loads() -> None:
            for _ in range(2):
                for body in bodies:
                    answer("/mutate", body)
            template = next((b for b in bodies if b'"patch"' in answer("/mutate", b)), bodies[0])
            for body in bodies:
                answer("/noop", body)
                answer("/fastapi-noop", body)
            one_template = [template] * len(bodies)
            counted("noop", "/noop", one_template, bytearray().extend)
            counted("fastapi_noop", "/fastapi-noop", one_template, array.array("b").extend)
            counted("hits", "/mutate", one_template, collections.deque(maxlen=0).extendleft)
            counted("fresh", "/mutate", fresh, collections.deque(maxlen=0).extend)

        asyncio.run(loads())
    return checks


def _caller(app: Any) -> Callable[[str, bytes], bytes]:
    """Call the ASGI app for one POST and return the response body. Nothing on the
    admission path waits on I/O here, so the coroutine finishes in one step, inside the
    caller's C function (a running event loop is still needed for the read timeout)."""

    def answer(path: str, body: bytes) -> bytes:
        received = False
        sent: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal received
            if received:
                return {"type": "http.disconnect"}
            received = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Mapping[str, Any]) -> None:
            if message["type"] == "http.response.body":
                sent.append(message["body"])

        scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "headers": [(b"content-length", b"%d" % len(body))],
            "query_string": b"",
            "root_path": "",
            "scheme": "https",
            "server": ("127.0.0.1", 8443),
            "client": ("127.0.0.1", 40000),
            "http_version": "1.1",
            "asgi": {"version": "3.0"},
            "app": app,
        }
        step = app(scope, receive, send)
        try:
            step.send(None)
        except StopIteration:
            return b"".join(sent)
        step.close()
        raise RuntimeError(f"{path} waited for I/O: the load would not run inside its function")

    return answer


def inclusive_counts(annotated: str, functions: Iterable[str]) -> dict[str, int]:
    """The inclusive instruction count of each of `functions` in the output of
    `callgrind_annotate --inclusive=yes` (0 for one it does not list)."""
    wanted = set(functions)
    counts = dict.fromkeys(wanted, 0)
    for line in annotated.splitlines():
        match = _INCLUSIVE.match(line)
        if match and match[2] in wanted:
            counts[match[2]] = max(counts[match[2]], int(match[1].replace(",", "")))
    return counts


def summarize(counts: Mapping[str, int], checks: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """Instructions per answer of each load, and what the two /mutate loads cost above
    each no-op and as a share of it."""
    per_answer = {name: round(counts[LOADS[name]] / checks[name]["answers"]) for name in LOADS}
    figures: dict[str, Any] = {"instructions_per_answer": per_answer}
    for baseline in _NOOPS:
        base = per_answer[baseline]
        figures[f"above_{baseline}"] = {name: per_answer[name] - base for name in _MUTATE}
        figures[f"{baseline}_over_mutate"] = {
            name: round(base / per_answer[name], 3) for name in _MUTATE if per_answer[name]
        }
    return figures


def problems(checks: Mapping[str, Mapping[str, int]]) -> list[str]:
    """What makes a load measure something other than what it claims."""
    found = []
    for name in ("hits", "fresh"):
        check = checks[name]
        if check["with_patch"] != check["answers"]:
            found.append(f"{name}: {check['with_patch']} of {check['answers']} answers patched")
    if checks["hits"]["memo_hits"] != checks["hits"]["answers"]:
        found.append(f"hits: {checks['hits']['memo_hits']} memo hits")
    if checks["fresh"]["memo_misses"] != checks["fresh"]["answers"]:
        found.append(f"fresh: {checks['fresh']['memo_misses']} memo misses")
    for name in _NOOPS:
        check = checks[name]
        if check["with_patch"] or check["memo_hits"] or check["memo_misses"]:
            found.append(f"{name}: decided or patched, not a no-op")
    return found


def _count(args: argparse.Namespace, work: Path) -> tuple[dict[str, int], dict[str, Any]]:
    """Run the loads under callgrind; the inclusive counts and the loads' checks."""
    missing = [tool for tool in ("valgrind", "callgrind_annotate") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(
            f"bench-instructions: {' and '.join(missing)} not found; install the Debian "
            "package valgrind (make bench-instructions does)"
        )
    out, checks_file = work / "callgrind.out", work / "checks.json"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    command += [f"--toggle-collect={function}" for function in LOADS.values()]
    command += [sys.executable, "-m", "benchmarks.instructions", "--loads-only", str(checks_file)]
    command += [f"--{name}={getattr(args, name)}" for name in _SIZES]
    # One hash seed: the order of the sets and dicts the decision builds changes a few
    # instructions from run to run otherwise.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"bench-instructions: the counted run failed:\n{done.stderr[-2000:]}")
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts = inclusive_counts(annotated, LOADS.values())
    if not all(counts.values()):
        raise SystemExit(
            "bench-instructions: callgrind counted nothing inside "
            f"{', '.join(f for f, n in counts.items() if not n)}: this Python has no symbols "
            "for its own functions"
        )
    return counts, orjson.loads(checks_file.read_bytes())


def main(argv: list[str] | None = None) -> int:
    """Count, print and write the figures (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser, pods=None, nodes=20)
    parser.set_defaults(workloads=3_000, policies=120, namespaces=30)
    parser.add_argument("--answers", type=int, default=1_000, help="answers per load")
    parser.add_argument("--out", type=Path, default=Path(".bench/instructions.json"))
    parser.add_argument("--loads-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loads_only is not None:
        args.loads_only.write_bytes(orjson.dumps(run_loads(args)))
        return 0
    with tempfile.TemporaryDirectory(prefix="kerf-instructions-") as tmp:
        counts, checks = _count(args, Path(tmp))
    figures = {
        **{name: getattr(args, name) for name in _SIZES},
        "build": decision_build(),
        "checks": checks,
        "problems": problems(checks),
        **summarize(counts, checks),
    }
    per_answer = figures["instructions_per_answer"]
    above, above_fastapi = figures["above_noop"], figures["above_fastapi_noop"]
    print(
        f"instructions per answer ({args.answers} answers a load, {args.workloads} workloads, "
        f"{figures['build']} build)"
    )
    labels = {"noop": "/noop", "fastapi_noop": "/fastapi-noop"}
    labels |= {"hits": "memo hits", "fresh": "fresh decisions"}
    for name, label in labels.items():
        extra = (
            f"  (+{above[name]:,} above /noop, +{above_fastapi[name]:,} above /fastapi-noop)"
            if name in above
            else ""
        )
        print(f"  {label:16s} {per_answer[name]:>10,}{extra}")
    for problem in figures["problems"]:
        print(f"WARNING {problem}")
    write_figures(args.out, figures)
    print(f"wrote {args.out}")
    return 1 if figures["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
