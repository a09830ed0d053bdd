"""`kerf status --shards` against kubesim: the shard sets' Leases in kerf's namespace, read
through the API server by label, one line per replica with its buckets, then the expired
and the free ones; no Lease, or flags it does not take, one line."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.apitime import micro_time
from app.model.shards import BUCKET, MEMBER, bucket_lease_name, member_lease_name, shard_labels
from app.runtime.clock import utc_now
from kubesim.testing import running_sim

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kerf-system"
#: long enough that a live Lease stays live however slowly the test runs
LIVE_S = 3600


def lease(name: str, labels: dict[str, str], holder: str, *, ago_s: float = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": LIVE_S if ago_s == 0 else 15,
            "renewTime": micro_time(utc_now() - timedelta(seconds=ago_s)),
        },
    }


async def kerf(kubeconfig: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`kerf status ARGV` in a fresh process, off the event loop the simulator serves on."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "kerf", "status", *argv, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


async def test_status_shards_prints_each_replica_s_buckets(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        leases = client.CoordinationV1Api(api)
        reconciler = [
            lease(
                member_lease_name("reconciler", "rec-a"),
                shard_labels("reconciler", MEMBER),
                "rec-a",
            ),
            lease(
                member_lease_name("reconciler", "rec-b"),
                shard_labels("reconciler", MEMBER),
                "rec-b",
            ),
            lease(
                member_lease_name("reconciler", "rec-c"),
                shard_labels("reconciler", MEMBER),
                "rec-c",
                ago_s=LIVE_S,
            ),
        ]
        holders = {b: "rec-a" for b in range(0, 30)} | {b: "rec-b" for b in range(30, 60)}
        for b, holder in holders.items():
            name = bucket_lease_name("reconciler", b, 64)
            reconciler.append(lease(name, shard_labels("reconciler", BUCKET), holder))
        for b in (60, 61):  # rec-c stopped renewing an hour ago
            name = bucket_lease_name("reconciler", b, 64)
            reconciler.append(
                lease(name, shard_labels("reconciler", BUCKET), "rec-c", ago_s=LIVE_S)
            )
        # 62 released, 63 held by rec-b
        reconciler.append(
            lease(bucket_lease_name("reconciler", 62, 64), shard_labels("reconciler", BUCKET), "")
        )
        reconciler.append(
            lease(
                bucket_lease_name("reconciler", 63, 64), shard_labels("reconciler", BUCKET), "rec-b"
            )
        )
        recommender = [
            lease(
                member_lease_name("recommender", "rcm-a"),
                shard_labels("recommender", MEMBER),
                "rcm-a",
            ),
            lease(
                bucket_lease_name("recommender", 0, 1), shard_labels("recommender", BUCKET), "rcm-a"
            ),
        ]
        others = [
            # Released by the single leader of a version before sharding: not shown.
            lease("kerf-reconciler", {}, ""),
            lease("kerf-webhook", {}, "kerf-webhook-x"),
            lease("someone-else", {"app": "x"}, "x"),
        ]
        for body in reconciler + recommender + others:
            await leases.create_namespaced_lease(NAMESPACE, body)
        # Another namespace's shard Leases are not kerf's.
        await leases.create_namespaced_lease(
            "default",
            lease(
                member_lease_name("reconciler", "elsewhere"),
                shard_labels("reconciler", MEMBER),
                "elsewhere",
            ),
        )

        shown = await kerf(sim.kubeconfig_path, "--shards")
        assert shown.returncode == 0, shown.stderr
        lines = [line.split() for line in shown.stdout.splitlines()]
        assert lines[0] == ["SET", "REPLICA", "BUCKETS", "NAMESPACES", "RANGES", "RENEWED"]
        # every namespace in one row of each set
        namespaces = len((await client.CoreV1Api(api).list_namespace()).items)
        assert sum(int(line[3]) for line in lines[1:] if line[0] == "reconciler") == namespaces
        lines = [line[:3] + line[4:] for line in lines]
        ages = [line[4:] for line in lines[1:]]
        assert [line[:4] for line in lines[1:]] == [
            ["reconciler", "rec-a", "30", "00-29"],
            ["reconciler", "rec-b", "31", "30-59,63"],
            ["reconciler", "rec-c", "0", "-"],
            ["reconciler", "(expired)", "2", "60-61"],
            ["reconciler", "(free)", "1", "62"],
            ["recommender", "rcm-a", "1", "00"],
        ]
        for age in (ages[0], ages[1], ages[5]):
            assert len(age) == 2 and re.fullmatch(r"\d+s|\d+m\d+s", age[0]) and age[1] == "ago"
        assert re.fullmatch(r"1h\d+m\d+s", ages[2][0]) and ages[2][1:] == ["ago,", "expired"]
        assert ages[3] == ages[4] == ["-"]

        elsewhere = await kerf(sim.kubeconfig_path, "--shards", "--kerf-namespace", "default")
        assert elsewhere.returncode == 0, elsewhere.stderr
        assert [line.split()[:3] for line in elsewhere.stdout.splitlines()[1:]] == [
            ["reconciler", "elsewhere", "0"]
        ]

        # `--shards 1`: the single leader's Lease, without shard labels.
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": "single"}})
        await leases.create_namespaced_lease("single", lease("kerf-reconciler", {}, "rec-0"))
        single = await kerf(sim.kubeconfig_path, "--shards", "--kerf-namespace", "single")
        assert single.returncode == 0, single.stderr
        [row] = [line.split() for line in single.stdout.splitlines()[1:]]
        assert row.pop(3) == str(len((await client.CoreV1Api(api).list_namespace()).items))
        assert row[:5] == ["reconciler", "rec-0", "all", "(one", "leader)"]
        assert re.fullmatch(r"\d+s|\d+m\d+s", row[5]) and row[6:] == ["ago"]

        none = await kerf(sim.kubeconfig_path, "--shards", "--kerf-namespace", "kube-system")
        assert (none.returncode, none.stdout) == (0, "")
        assert none.stderr.strip() == (
            "kerf status: no shard Leases in namespace kube-system: kerf does not run "
            "there, or its services have not started (--kerf-namespace)"
        )


async def test_shards_takes_no_watch_and_no_workload_namespace(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"  # never read: the flags are refused first
    for extra in (["-w"], ["-n", "shop"]):
        done = await kerf(config, "--shards", *extra)
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith("kerf status: --shards reads kerf's own Leases")
