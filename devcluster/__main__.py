"""`python -m devcluster --kubeconfig FILE`: a real control plane until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from devcluster.cluster import DevCluster, Options
from devcluster.processes import ComponentError, MissingBinary

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
        _fail(f"{exc.path} is missing; run make cluster-tools")
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
        assert cluster.metrics is not None  # started before the cluster reports ready
        print(
            f"devcluster serving on {url}, kubeconfig {options.kubeconfig}, "
            f"cadvisor metrics {cluster.metrics.url}",
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


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the cluster until SIGINT/SIGTERM, exit with its code."""
    parser = argparse.ArgumentParser(
        prog="python -m devcluster",
        description="Run a real Kubernetes control plane on 127.0.0.1, with a node agent "
        "playing the kubelet of every node.",
    )
    parser.add_argument("--kubeconfig", required=True, type=Path, help="write it here")
    parser.add_argument("--nodes", type=int, default=1, help="Ready nodes to create (default 1)")
    parser.add_argument("--node-cpu", default="4")
    parser.add_argument("--node-memory", default="8Gi")
    parser.add_argument(
        "--audit-log",
        type=Path,
        help="write kube-apiserver's audit log of every write here (JSON lines, Metadata)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    options = Options(
        args.kubeconfig, args.nodes, args.node_cpu, args.node_memory, audit_log=args.audit_log
    )
    code = EXIT_START_FAILED
    with contextlib.suppress(KeyboardInterrupt):
        code = asyncio.run(_serve(options))
    sys.exit(code)


if __name__ == "__main__":
    main()
