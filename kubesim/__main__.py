"""`python -m kubesim --port P --kubeconfig FILE`: serve until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import signal
import sys
from pathlib import Path

from kubesim.audit import AuditLog
from kubesim.clock import Clock
from kubesim.sim import Simulator


async def _serve(args: argparse.Namespace) -> None:
    sim = Simulator(clock=Clock() if args.real_clock else None)
    if args.audit_log:
        sim.http.audit = AuditLog(Path(args.audit_log))
    url = await sim.start(args.host, args.port)
    if args.kubeconfig:
        sim.write_kubeconfig(args.kubeconfig)
    for i in range(args.nodes):
        await sim.add_node(f"node-{i + 1}", cpu=args.node_cpu, memory=args.node_memory)
    for mapping in args.service or []:
        target, _, address = mapping.partition("=")
        namespace, _, name = target.partition("/")
        sim.admission.set_service_address(namespace, name, address)
    print(
        f"kubesim serving on {url}"
        + (f", kubeconfig {args.kubeconfig}" if args.kubeconfig else ""),
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await sim.stop()


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m kubesim",
        description="Serve a simulated Kubernetes API on 127.0.0.1 (plain HTTP).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for kubectl here")
    parser.add_argument("--nodes", type=int, default=1, help="Ready nodes to create (default 1)")
    parser.add_argument("--node-cpu", default="4")
    parser.add_argument("--node-memory", default="8Gi")
    parser.add_argument(
        "--service",
        action="append",
        metavar="NS/NAME=HOST:PORT",
        help="where webhook clientConfig.service NS/NAME is served",
    )
    parser.add_argument(
        "--real-clock", action="store_true", help="use wall-clock time instead of the fake clock"
    )
    parser.add_argument(
        "--audit-log",
        help="append an audit log of every write here (JSON lines, as kube-apiserver's)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(_serve(args))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            print(f"kubesim: --port {args.port} on {args.host} is in use", file=sys.stderr)
            raise SystemExit(2) from None


if __name__ == "__main__":
    main()
