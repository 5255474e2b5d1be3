"""A loopback OpenAI-compatible HTTP server that replays recorded provider payloads.

Tests (and the streaming benchmark) drive the real ``openai`` client against it, so the
client's HTTP, SSE parsing and error code paths are exercised end to end. The server binds
127.0.0.1 on a free port, answers ``POST .../chat/completions`` with the next queued reply
(or a sticky default), and records every request it received (path, headers, JSON body).

Fixture files live in ``tests/fixtures/providers`` (see the README there):
``*.json`` holds ``status`` and ``body`` (non-stream) or ``chunks`` (stream); ``*.jsonl``
holds one raw SSE ``data:`` payload per line.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "providers"


@dataclass
class Reply:
    """One canned HTTP reply: a status, headers and the exact body bytes."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def load_fixture(name: str) -> dict[str, Any]:
    """Load a ``*.json`` fixture by file name (with or without the ``.json`` suffix)."""
    path = FIXTURES / (name if name.endswith(".json") else f"{name}.json")
    return json.loads(path.read_text(encoding="utf-8"))


def sse_body(payloads: list[Any]) -> bytes:
    """Encode payloads as SSE: dicts are JSON-dumped, strings (``"[DONE]"``) sent as is."""
    parts = []
    for item in payloads:
        line = item if isinstance(item, str) else json.dumps(item)
        parts.append(f"data: {line}\n\n")
    return "".join(parts).encode("utf-8")


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A non-streamed JSON reply."""
    return Reply(status, json.dumps(body).encode("utf-8"), "application/json", dict(headers or {}))


def stream_reply(chunks: list[Any], *, done: bool = True) -> Reply:
    """A streamed SSE reply from chunk dicts; appends ``[DONE]`` unless already there."""
    items = list(chunks)
    if done and items[-1:] != ["[DONE]"]:
        items.append("[DONE]")
    return Reply(200, sse_body(items), "text/event-stream")


def fixture_reply(name: str) -> Reply:
    """The reply a fixture file describes.

    ``name.jsonl`` streams the raw lines verbatim; ``name.json`` serves ``body`` with its
    ``status`` (and ``headers``), or streams its ``chunks``.
    """
    if name.endswith(".jsonl"):
        lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
        return Reply(200, sse_body([ln for ln in lines if ln.strip()]), "text/event-stream")
    data = load_fixture(name)
    if data["stream"]:
        return Reply(data["status"], sse_body(data["chunks"]), "text/event-stream")
    return json_reply(data["body"], data["status"], {
        k: v
        for k, v in (data.get("headers") or {}).items()
        if k.lower() not in ("content-type", "content-length", "transfer-encoding")
    })


class ProviderServer:
    """The server. Use as a context manager, or call ``start()`` / ``stop()``.

    Attributes:
        requests: every request received, as ``{"path", "headers", "json"}`` dicts.
        default: the reply used when the queue is empty (None: answer 500 "no reply queued").
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.default: Reply | None = None
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- queueing -------------------------------------------------------------------------
    def queue(self, *replies: Reply | str) -> ProviderServer:
        """Queue replies (``Reply`` objects or fixture file names), served in order."""
        with self._lock:
            for r in replies:
                self._queue.append(fixture_reply(r) if isinstance(r, str) else r)
        return self

    def next_reply(self) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.default is not None:
            return self.default
        return json_reply({"error": {"message": "no reply queued", "code": None}}, 500)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        if self._httpd is None:
            raise RuntimeError("ProviderServer is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def last_json(self) -> dict[str, Any]:
        """The JSON body of the latest request."""
        return self.requests[-1]["json"]

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> ProviderServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection per client

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append(
                        {"path": self.path, "json": body,
                         "headers": {k.lower(): v for k, v in self.headers.items()}}
                    )
                reply = server.next_reply()
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("content-length", str(len(reply.body)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(reply.body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
