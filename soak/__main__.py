"""`python -m soak [--seed N] [--duration SECONDS] [--workdir DIR]` (`make soak`)."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from pathlib import Path

from soak.cluster import SoakError
from soak.run import Options, soak


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the soak, return its exit code (2 for bad input or a
    cluster that could not be set up)."""
    parser = argparse.ArgumentParser(
        prog="python -m soak",
        description="kerf under chaos on kubesim for a bounded time, then checks as figures.",
    )
    parser.add_argument("--seed", type=int, help="the chaos schedule's seed (default: random)")
    parser.add_argument(
        "--duration", type=float, default=110.0, metavar="SECONDS", help="seconds of chaos"
    )
    parser.add_argument("--workdir", type=Path, help="where logs go (default: a new temp dir)")
    args = parser.parse_args(argv)
    if args.duration <= 0:
        print("python -m soak: --duration must be positive", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    try:
        return asyncio.run(soak(Options(seed, args.duration, args.workdir)))
    except SoakError as exc:
        print(f"python -m soak: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
