"""`python -m devcluster --kubeconfig FILE [--kubelet real|agent]`: a real control plane and
its node(s) until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from devcluster import realnode
from devcluster.cluster import DevCluster, Options
from devcluster.processes import (
    ComponentError,
    MissingBinary,
    find_binaries,
    find_images,
    tools_dir,
)

EXIT_START_FAILED = 1
EXIT_MISSING_BINARY = 2


def _fail(message: str, tail: str = "") -> None:
    print(f"devcluster: {message}", file=sys.stderr, flush=True)
    if tail:
        print(tail, file=sys.stderr, flush=True)


async def _serve(options: Options) -> int:
    try:
        cluster = DevCluster(options)
    except MissingBinary as exc:
        hint = "make node-images" if exc.path.suffix == ".tar" else "make cluster-tools"
        _fail(f"{exc.path} is missing; run {hint}")
        return EXIT_MISSING_BINARY
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        starting = asyncio.ensure_future(cluster.start())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            # Asked to stop while starting: not a failure.
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, ComponentError):
                await starting
            return 0
        try:
            url = starting.result()
        except ComponentError as exc:
            _fail(str(exc), exc.log_tail)
            return EXIT_START_FAILED
        except Exception as exc:  # noqa: BLE001 - one line, as for any failed start
            logging.getLogger("devcluster").debug("start failed", exc_info=True)
            _fail(f"start failed: {type(exc).__name__}: {exc} (-v shows where)")
            return EXIT_START_FAILED
        print(
            f"devcluster serving on {url} with the {options.kubelet} kubelet, "
            f"kubeconfig {options.kubeconfig}, cadvisor metrics {cluster.metrics_url}",
            flush=True,
        )
        exited = asyncio.ensure_future(cluster.wait_exit())
        await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if exited.done():
            failure = exited.result()
            _fail(str(failure), failure.log_tail)
            return EXIT_START_FAILED
        exited.cancel()
        return 0
    finally:
        stopping.cancel()
        await cluster.stop()
        for problem in cluster.problems:
            _fail(f"left on the machine: {problem}")


def default_kubelet(nodes: int) -> str:
    """`real` where a real node can run, else `agent` with one line saying why."""
    why = "more than one node" if nodes != 1 else realnode.tools_missing()
    if not why:
        try:
            find_binaries(tools_dir(), with_kubelet=True)
            find_images()
        except MissingBinary as exc:
            why = f"{exc.path} is missing"
    if why:
        print(f"devcluster: the node agent plays the kubelet: {why}", file=sys.stderr, flush=True)
        return "agent"
    return "real"


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the cluster until SIGINT/SIGTERM, exit with its code."""
    parser = argparse.ArgumentParser(
        prog="python -m devcluster",
        description="Run a real Kubernetes control plane on 127.0.0.1, with a real kubelet "
        "and containerd on this machine, or a node agent playing the kubelet of every node.",
    )
    parser.add_argument("--kubeconfig", required=True, type=Path, help="write it here")
    parser.add_argument(
        "--kubelet",
        choices=("real", "agent"),
        help="real: containerd and one kubelet (root, make node-tools); agent: the node "
        "agent, any number of nodes (default: real where it can run, else agent)",
    )
    parser.add_argument("--nodes", type=int, default=1, help="Ready nodes to create (default 1)")
    parser.add_argument(
        "--node-cpu",
        help="the node's allocatable CPU (agent default 4; real: the machine's, less 200m)",
    )
    parser.add_argument(
        "--node-memory",
        help="the node's allocatable memory (agent default 8Gi; real: the machine's, less "
        "512Mi and the kubelet's 100Mi eviction threshold)",
    )
    parser.add_argument(
        "--audit-log",
        type=Path,
        help="write kube-apiserver's audit log of every write here (JSON lines, Metadata)",
    )
    parser.add_argument(
        "--image",
        action="append",
        default=[],
        type=Path,
        metavar="TAR",
        help="a docker-archive tarball a real node imports besides its own, as `kind load "
        "image-archive` does (repeatable; e.g. .tools/images/kerf.tar from make kerf-image); "
        "the agent runs no image and ignores it",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    kubelet = args.kubelet or default_kubelet(args.nodes)
    if kubelet == "real" and args.nodes != 1:
        parser.error("--kubelet real runs one node; --nodes N needs --kubelet agent")
    for tarball in args.image:
        if not tarball.is_file():
            parser.error(f"--image {tarball}: no such file (make kerf-image builds kerf.tar)")
    options = Options(
        args.kubeconfig,
        args.nodes,
        args.node_cpu,
        args.node_memory,
        audit_log=args.audit_log,
        kubelet=kubelet,
        images=tuple(tarball.resolve() for tarball in args.image),
    )
    code = EXIT_START_FAILED
    with contextlib.suppress(KeyboardInterrupt):
        code = asyncio.run(_serve(options))
    sys.exit(code)


if __name__ == "__main__":
    main()
