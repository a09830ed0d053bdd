"""`make bench` (state dir): how long `--state-dir` / `kerf explain -f` take to load the
generated cluster of `benchmarks.explain` (25,000 workloads, 35,000 pods, 1,000 nodes, 1,000
policies by default) written as YAML files, and as JSON files.

Prints the figures and writes them as JSON. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.store.statedir import load_view
from app.store.yamlload import LOADER
from benchmarks.explain import documents
from benchmarks.figures import add_size_arguments, peak_rss_mib, write_figures

#: documents per file: a state dir is usually a handful of dumps, not one file per object
CHUNK = 2_000


def _chunks(args: argparse.Namespace) -> Iterator[list[dict[str, Any]]]:
    docs = documents(
        workloads=args.workloads,
        pods=args.pods,
        nodes=args.nodes,
        policies=args.policies,
        namespaces=args.namespaces,
    )
    while chunk := list(islice(docs, CHUNK)):
        yield chunk


def _yaml(chunk: list[dict[str, Any]]) -> bytes:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump_all(chunk, Dumper=dumper, default_flow_style=False, sort_keys=False)
    return text.encode()


def _json(chunk: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": chunk})


def write_state_dir(
    args: argparse.Namespace, directory: Path, suffix: str, encode: Callable[[list[Any]], bytes]
) -> tuple[int, int]:
    """Write the cluster into `directory`; returns (documents, bytes)."""
    count = size = 0
    for index, chunk in enumerate(_chunks(args)):
        body = encode(chunk)
        (directory / f"cluster-{index:03d}{suffix}").write_bytes(body)
        count += len(chunk)
        size += len(body)
    return count, size


def _time_load(directory: Path, rounds: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU seconds of each load, and the pods of the last view."""
    walls: list[float] = []
    cpus: list[float] = []
    pods = 0
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        view = load_view([directory])
        walls.append(round(time.perf_counter() - wall, 2))
        cpus.append(round(time.process_time() - cpu, 2))
        pods = sum(1 for _ in view.pods())
        del view
    return walls, cpus, pods


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Write the state dir in both encodings, load each `rounds` times."""
    figures: dict[str, Any] = {
        "workloads": args.workloads,
        "pods": args.pods,
        "nodes": args.nodes,
        "policies": args.policies,
        "yaml_loader": LOADER.__name__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    for name, suffix, encode in (("yaml", ".yaml", _yaml), ("json", ".json", _json)):
        with tempfile.TemporaryDirectory(prefix="kerf-bench-") as tmp:
            count, size = write_state_dir(args, Path(tmp), suffix, encode)
            walls, cpus, pods = _time_load(Path(tmp), args.rounds)
        figures[f"{name}_documents"] = count
        figures[f"{name}_mib"] = round(size / 2**20, 1)
        figures[f"{name}_view_pods"] = pods
        figures[f"{name}_load_seconds"] = min(walls)
        figures[f"{name}_load_cpu_seconds"] = min(cpus)
        figures[f"{name}_rounds_seconds"] = walls
    figures["peak_rss_mib"] = peak_rss_mib()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Entry point of the state-dir part of `make bench`."""
    parser = argparse.ArgumentParser(description=__doc__)
    add_size_arguments(parser)
    parser.add_argument("--rounds", type=int, default=2, help="timed loads per encoding")
    parser.add_argument("--out", type=Path, default=Path(".bench/statedir.json"))
    args = parser.parse_args(argv)
    figures = run(args)
    write_figures(args.out, figures)
    for key, value in figures.items():
        print(f"{key:28} {value}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
