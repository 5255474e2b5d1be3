"""A lean SSE response: the stream's frames written from the request's own task.

``SSEStream`` sends the response head and every frame already there (a new run's
``metadata`` event) without handing off to another task first, so under load the first
event leaves in the same turn of the event loop as the request's handling, not after a
lap behind every other ready task. Beside it, one task watches for the client leaving
(the stream is then cancelled, and its generator's ``finally`` runs) and sends a
``: ping`` comment when the stream was quiet for ``ping_s`` seconds. A server that is
shutting down (uvicorn's exit signal, as ``sse_starlette`` records it) ends its streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping

from sse_starlette.sse import AppStatus  # uvicorn's exit signal, as sse_starlette records it
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

_HEAD = [(b"content-type", b"text/event-stream; charset=utf-8"),
         (b"cache-control", b"no-store"), (b"connection", b"keep-alive"),
         (b"x-accel-buffering", b"no")]
_WATCH_S = 1.0  # how often the watcher looks for a shutdown


def _shutting_down() -> bool:
    return bool(AppStatus.should_exit)


class SSEStream(Response):
    """``text/event-stream`` of ``frames`` (complete SSE messages as bytes).

    Args:
        frames: the messages; the stream ends when it does (or the client leaves).
        headers: extra response headers.
        ping_s: a comment is sent after this many quiet seconds.
    """

    def __init__(self, frames: AsyncIterator[bytes], headers: Mapping[str, str] | None = None,
                 ping_s: float = 15.0) -> None:
        self.frames = frames
        self.ping_s = ping_s
        self.status_code = 200
        self.background = None
        self.raw_headers = _HEAD + [(k.lower().encode("latin-1"), v.encode("latin-1"))
                                    for k, v in (headers or {}).items()]
        self._last = time.monotonic()
        self._gone = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": self.raw_headers})
        if scope.get("method") == "HEAD":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        me = asyncio.current_task()
        watcher = asyncio.ensure_future(self._watch(receive, send, me))
        try:
            async for frame in self.frames:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                self._last = time.monotonic()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not self._gone or me is None:
                raise
            me.uncancel()  # the client left (or the server stops): the stream just ends
            with contextlib.suppress(OSError, RuntimeError):  # complete the response
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]

    async def _watch(self, receive: Receive, send: Send, stream: asyncio.Task[object] | None
                     ) -> None:
        left = asyncio.ensure_future(receive())
        try:
            while True:
                done, _ = await asyncio.wait({left}, timeout=_WATCH_S)
                if done and left.result().get("type") == "http.disconnect" or _shutting_down():
                    break
                if done:  # another message (more body): keep listening
                    left = asyncio.ensure_future(receive())
                if time.monotonic() - self._last >= self.ping_s:
                    self._last = time.monotonic()
                    await send({"type": "http.response.body", "body": b": ping\r\n\r\n",
                                "more_body": True})
        except (OSError, RuntimeError):
            pass  # the connection is gone
        finally:
            left.cancel()
        self._gone = True
        if stream is not None:
            stream.cancel()
