"""Start the real server (uvicorn on a free loopback port) for the server tests.

``running(graphs, ...)`` serves in a thread of this process (its own event loop);
``Subprocess`` runs ``python -m threadloom.server`` in a child process, for the tests
that kill it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from threadloom.server.config import ServerConfig
from threadloom.server.serve import open_app
from threadloom.server.state import Limits

HERE = Path(__file__).resolve().parent
GRAPHS = {
    "echo": f"{HERE / 'server_graphs.py'}:echo_graph",
    "human": f"{HERE / 'server_graphs.py'}:human_graph",
    "slow": f"{HERE / 'server_graphs.py'}:slow_graph",
    "agent": f"{HERE / 'server_graphs.py'}:make_agent",
    "nested": f"{HERE / 'server_graphs.py'}:nested_graph",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/ok", timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"server at {url} did not come up")


@contextlib.contextmanager
def running(tmp_path: Path, graphs: dict[str, str] | None = None, *,
            postgres: str | None = None, limits: Limits | None = None,
            **config: Any) -> Iterator[str]:
    """Serve ``graphs`` on a free port; yields the base URL."""
    port = free_port()
    cfg = ServerConfig(graphs=graphs or GRAPHS, db=str(tmp_path / "server.db"),
                       postgres=postgres, port=port, **config)
    app = open_app(cfg, limits=limits)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=15)


class Subprocess:
    """``python -m threadloom.server`` in a child process."""

    def __init__(self, args: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "threadloom.server", *args, "--port", str(port)],
            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)

    def up(self) -> Subprocess:
        try:
            wait_up(self.url)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"server failed: {self.output()}") from None
        return self

    def kill(self) -> None:
        """SIGKILL: no cleanup at all."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        if self.proc.poll() is None:
            return ""
        return self.proc.stdout.read() if self.proc.stdout else ""
