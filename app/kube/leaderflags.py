"""The leader-election flags of the services that elect a leader (`kerf reconciler`,
`kerf recommend`): the same names, defaults and rules for both."""

from __future__ import annotations

import argparse

from app.kube.leadertimings import LEASE_DURATION_S, LeaderTimings
from app.model.shards import DEFAULT_BUCKETS

#: more buckets than this would be more Leases to renew than work to share
MAX_BUCKETS = 256


def add_leader_arguments(parser: argparse.ArgumentParser) -> None:
    """`--lease-duration`, `--renew-deadline` and `--retry-period`."""
    parser.add_argument(
        "--lease-duration",
        type=float,
        default=LEASE_DURATION_S,
        metavar="SECONDS",
        help="leader Lease duration: a follower takes over this long after the leader stops renewing",
    )
    parser.add_argument(
        "--renew-deadline",
        type=float,
        metavar="SECONDS",
        help="the leader stops writing once it has not renewed its Lease for this long; "
        "shorter than --lease-duration (default: two thirds of it)",
    )
    parser.add_argument(
        "--retry-period",
        type=float,
        metavar="SECONDS",
        help="how often the Lease is renewed, or tried for (default: a fifth of "
        "--lease-duration, at most 2)",
    )


def add_shard_argument(parser: argparse.ArgumentParser) -> None:
    """`--shards`: the buckets the namespaces are hashed into, each with its Lease."""
    parser.add_argument(
        "--shards",
        type=int,
        default=DEFAULT_BUCKETS,
        metavar="N",
        help="buckets of the namespace hash, each worked by the replica holding its Lease; "
        "1: one leader works every namespace, as before sharding (default: %(default)s)",
    )


def shard_count(args: argparse.Namespace) -> int | str:
    """The number of buckets asked for, or why it cannot be."""
    if not 1 <= args.shards <= MAX_BUCKETS:
        return f"--shards must be between 1 and {MAX_BUCKETS} (got {args.shards})"
    return int(args.shards)


def leader_timings(args: argparse.Namespace) -> LeaderTimings | str:
    """The timings the flags ask for, or why they cannot keep two leaders apart."""
    timings = LeaderTimings.scaled(args.lease_duration, args.renew_deadline, args.retry_period)
    problem = timings.problem()
    return timings if problem is None else problem
