"""Every command run by hand against an API server that cannot be reached, refuses, resets
or never answers: exit 2 within `--api-timeout` with one line that names the server and
the error, never a traceback, never a line per resource (issue 36, part 1)."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what each command is asked, beside --kubeconfig and --api-timeout
COMMANDS = {
    "reconciler --once": ["reconciler", "--once", "--metrics-port", "0"],
    "reconciler --dry-run": ["reconciler", "--dry-run", "--metrics-port", "0"],
    "recommend --once": ["recommend", "--once", "--prometheus", "http://127.0.0.1:9"],
    "recommend --dry-run": [
        "recommend",
        "--dry-run",
        "--prometheus",
        "http://127.0.0.1:9",
        "--metrics-port",
        "0",
    ],
    "report": ["report"],
    "approve": ["approve"],
    "approve deployment/web": ["approve", "deployment/web", "-n", "shop"],
    "status": ["status"],
    "explain": ["explain"],
}
#: the commands that read once and give up at the first refusal (no retries to bound)
READ_ONCE = ("report", "approve", "status", "explain")


def kubeconfig(directory: Path, port: int) -> Path:
    path = directory / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path


def one_line(tmp_path: Path, port: int, command: str) -> str:
    """Run `kerf COMMAND` against 127.0.0.1:port with a 1 s bound: exit 2, one line."""
    argv = [sys.executable, "-m", "kerf", *COMMANDS[command]]
    argv += ["--kubeconfig", str(kubeconfig(tmp_path, port)), "--api-timeout", "1"]
    if "--metrics-port" in argv:
        argv += ["--metrics-host", "127.0.0.1"]
    env = {**os.environ, "POD_NAMESPACE": "kerf-system", "POD_NAME": "unreachable-test"}
    # The subprocess's own timeout only keeps a command that never exits from hanging the suite.
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == 2, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    line = lines[0]
    assert line.startswith(f"kerf {command.split()[0]}: "), line
    assert f"http://127.0.0.1:{port}" in line, line
    return line


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(status: int, message: str) -> Iterator[int]:
    """A server that answers every request with an API Status of `status`."""
    body = (
        f'{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"{message}",'
        f'"code":{status}}}'
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_PUT = do_GET

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that went away mid-answer (the command gave up)

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def socket_server(on_accept: Callable[[socket.socket], None] | None) -> Iterator[int]:
    """A listening socket: each connection is handed to `on_accept`, or, without it, never
    accepted (the kernel completes the handshake; no answer ever comes)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            assert on_accept is not None
            on_accept(connection)

    thread = threading.Thread(target=serve, daemon=True)
    if on_accept is not None:
        thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        if on_accept is not None:
            thread.join()
        listener.close()


def reset(connection: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0) as soon as the connection is accepted."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_closed_port(tmp_path: Path, command: str) -> None:
    line = one_line(tmp_path, free_port(), command)
    assert "Connect call failed" in line or "Cannot connect" in line, line
    if command.split()[0] not in READ_ONCE:
        assert "is unavailable" in line and "gave up after 1s (--api-timeout)" in line, line


@pytest.mark.parametrize("command", ["reconciler --once", "report", "approve deployment/web"])
def test_a_server_answering_503(tmp_path: Path, command: str) -> None:
    with http_server(503, "the server is shutting down") as port:
        line = one_line(tmp_path, port, command)
    assert "HTTP 503: the server is shutting down" in line, line


def test_a_server_that_resets_every_connection(tmp_path: Path) -> None:
    with socket_server(reset) as port:
        line = one_line(tmp_path, port, "reconciler --dry-run")
    assert "is unavailable" in line and "gave up after 1s" in line, line


@pytest.mark.parametrize("command", ["reconciler --once", "report", "status", "explain"])
def test_a_server_that_never_answers(tmp_path: Path, command: str) -> None:
    with socket_server(None) as port:
        line = one_line(tmp_path, port, command)
    assert "no answer from the API server" in line and "gave up after 1s" in line, line


def test_a_server_that_refuses_kerf_fails_at_once(tmp_path: Path) -> None:
    with http_server(403, "forbidden: User cannot list resource") as port:
        line = one_line(tmp_path, port, "reconciler --once")
    assert "refuses" in line and "HTTP 403: forbidden" in line, line
