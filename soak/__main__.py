"""`python -m soak [--seed N] [--duration SECONDS] [--workdir DIR] [--shards N]` (`make soak`,
`make soak-sharded`)."""

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
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        metavar="N",
        help="three reconciler replicas sharing N buckets (default 1: a leader and a follower)",
    )
    args = parser.parse_args(argv)
    if args.duration <= 0:
        print("python -m soak: --duration must be positive", file=sys.stderr)
        return 2
    if args.shards < 1:
        print("python -m soak: --shards must be at least 1", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    try:
        return asyncio.run(soak(Options(seed, args.duration, args.workdir, args.shards)))
    except SoakError as exc:
        print(f"python -m soak: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
