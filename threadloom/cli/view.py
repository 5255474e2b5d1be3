"""The live view of a streamed run: node steps, tokens as they arrive, tool calls and
results, interrupts, and a progress line while nothing else is printed.

``stream_run`` streams one run of a graph into a ``RunView``; ``new_view`` makes one on
stdout. ``RunView.handle(mode, chunk)`` takes what ``graph.stream(...,
stream_mode=[...])`` yields. Tokens go to the output as they come; everything else is
printed as whole lines. While a run is silent for a while, a progress line says which
step is running and for how long: on a terminal it is redrawn in place (and erased before
the next output); elsewhere a full line is printed every ``quiet_s`` seconds.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import IO, Any

from threadloom.cli.render import dumps, printable

__all__ = ["RunView", "new_view", "stream_run"]


_SPIN = "|/-\\"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _checkpoint_text(event: dict[str, Any]) -> str:
    """One line for a ``checkpoints`` stream event (``id``, ``metadata``, ``next``)."""
    meta = event.get("metadata") or {}
    nxt = ", ".join(str(n) for n in event.get("next") or []) or "-"
    return (f"checkpoint {event.get('id')} saved (super-step {meta.get('step')}, "
            f"{meta.get('source')}); next: {nxt}")


def _debug_text(event: dict[str, Any]) -> str:
    """One line for a ``debug`` stream event (``type``, ``step``, ``payload``)."""
    kind, payload = event.get("type"), event.get("payload") or {}
    if kind == "checkpoint":
        return _checkpoint_text(payload)
    where = f"super-step {event.get('step')} task {payload.get('name')}"
    if kind == "task":
        return f"{where} starts, input {_short(dumps(payload.get('input'), indent=None), 300)}"
    if kind == "task_result" and payload.get("error") is not None:
        return f"{where} failed: {_short(payload['error'], 300)}"
    if kind == "task_result":
        return f"{where} returned {_short(dumps(payload.get('result'), indent=None), 300)}"
    return _short(dumps(event, indent=None), 400)


class RunView:
    """Render one run's stream events as text.

    Args:
        out: where to write (usually ``sys.stdout``).
        show: the stream mode whose payloads are printed in full: ``"updates"`` (each
            node's update as JSON), ``"values"`` (the state after each step), ``"custom"``
            or ``"messages"`` (tokens only), ``"debug"`` (task events), ``"checkpoints"``.
            Node names (with the super-step they ran in, read from ``debug`` task events
            when the stream carries them: the step ``threads history`` shows) and tokens
            are always shown.
        tty: whether ``out`` is a terminal (progress line redrawn in place).
        quiet_s: seconds of silence before the progress line appears.
    """

    def __init__(self, out: IO[str], *, show: str = "messages", tty: bool = False,
                 quiet_s: float = 2.0) -> None:
        self.out, self.show, self.tty, self.quiet_s = out, show, tty, quiet_s
        self.interrupts: list[Any] = []
        self.steps = 0  # node headers printed
        self.step: int | None = None  # the super-step of the last task event, if any
        self.tokens = 0
        self.current = ""
        self._lock = threading.Lock()
        self._midline = False
        self._status_shown = False
        self._started = self._last = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._pending: dict[str, Any] = {}
        self._open: str | None = None
        self._shown: set[str | None] = set()
        self._calls_shown: set[str | None] = set()  # tool call ids already printed

    # -- output helpers -----------------------------------------------------------------

    def _write(self, text: str) -> None:
        """Write ``text`` (lone surrogates escaped, so no output refuses it), erasing the
        progress line first."""
        text = printable(text)
        with self._lock:
            if self._status_shown:
                self.out.write("\r\033[K")
                self._status_shown = False
            self.out.write(text)
            self.out.flush()
            self._midline = not text.endswith("\n")
            self._last = time.monotonic()

    def line(self, text: str) -> None:
        """Print ``text`` on a line of its own (ending an open token line first)."""
        self._write(("\n" if self._midline else "") + text + "\n")

    # -- progress -----------------------------------------------------------------------

    def __enter__(self) -> RunView:
        self._ticker = threading.Thread(target=self._tick, daemon=True, name="threadloom-view")
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1)
        self._flush_pending()
        with self._lock:
            if self._status_shown:
                self.out.write("\r\033[K")
                self._status_shown = False
        if self._midline:
            self._write("\n")

    def _tick(self) -> None:
        spin = 0
        period = 0.2 if self.tty else min(1.0, self.quiet_s)
        while not self._stop.wait(period):
            quiet = time.monotonic() - self._last
            if quiet < self.quiet_s:
                continue
            elapsed = time.monotonic() - self._started
            step = self.step if self.step is not None else self.steps + 1
            status = printable(f"still running: step {step}{self.current}, "
                               f"{elapsed:.0f}s elapsed")
            with self._lock:
                if self.tty:
                    if self._midline:
                        continue  # never draw over a line of streamed tokens
                    self.out.write(f"\r\033[K{_SPIN[spin % 4]} {status}")
                    self._status_shown = True
                    spin += 1
                else:
                    self.out.write(("\n" if self._midline else "") + f"... {status}\n")
                    self._midline = False
                    self._last = time.monotonic()
                self.out.flush()

    # -- events -------------------------------------------------------------------------

    def handle(self, mode: str, chunk: Any) -> None:
        """Render one ``(mode, chunk)`` event of a multi-mode stream."""
        if mode == "updates":
            self._on_updates(chunk)
        elif mode == "messages":
            message, meta = chunk
            self._on_message(message, meta or {})
        elif mode == "values" and self.show == "values":
            self.line(f"state: {dumps(chunk, indent=None)}")
        elif mode == "custom":
            self.line(f"custom: {dumps(chunk, indent=None)}")
        elif mode == "debug":
            if chunk.get("type") == "task" and isinstance(chunk.get("step"), int):
                self.step = chunk["step"]
            if self.show == "debug":
                self.line(f"  debug: {_debug_text(chunk)}")
        elif mode == "checkpoints":
            self.line(f"  {_checkpoint_text(chunk)}")

    def _header(self, node: str) -> None:
        self.steps += 1
        self._open = node
        self.line(f"[step {self.steps if self.step is None else self.step}] {node}")

    def _on_updates(self, chunk: dict[str, Any]) -> None:
        self._flush_pending()
        for node, update in chunk.items():
            if node == "__interrupt__":
                self.interrupts.extend(update)
                for item in update:
                    value = dumps(getattr(item, "value", item), indent=None)
                    self.line(f"[paused] interrupt: {_short(value, 400)}")
                continue
            if node != self._open:  # not yet announced by its streamed messages
                self._header(node)
            self._open = None
            self.current = ""
            self._unshown_calls(update)
            if self.show == "updates" and update:
                self.line(f"  update: {_short(dumps(update, indent=None), 400)}")

    def _unshown_calls(self, update: Any) -> None:
        """Print the tool calls of an update's messages that no stream event showed: a
        model that prompts for tool calls as JSON streams text, and its calls exist only
        in the finished message."""
        messages = update.get("messages") if isinstance(update, dict) else None
        for message in messages if isinstance(messages, list) else ():
            if getattr(message, "type", "") == "ai":
                self._show_calls(message.tool_calls)

    def _show_calls(self, calls: list[Any]) -> None:
        for call in calls:
            if call.get("id") is None or call.get("id") not in self._calls_shown:
                self._calls_shown.add(call.get("id"))
                self.line(f"  -> {call['name']}({dumps(call['args'], indent=None)})")

    def _on_message(self, message: Any, meta: dict[str, Any]) -> None:
        node = meta.get("langgraph_node")
        if node and node != self._open:
            self._flush_pending()
            self._header(str(node))
        self.current = f" ({node})" if node else self.current
        kind = getattr(message, "type", "")
        if kind == "AIMessageChunk":
            self._shown.add(message.id)
            if message.text:
                self.tokens += 1
                self._write(message.text)
            if message.tool_call_chunks or message.id in self._pending:
                previous = self._pending.get(message.id)
                self._pending[message.id] = message if previous is None else previous + message
            return
        self._flush_pending()
        if message.id is not None and message.id in self._shown:
            return  # already streamed, or the same message written again under another key
        self._shown.add(message.id)
        if kind == "ai":
            if message.text:
                self.line(message.text)
            self._show_calls(message.tool_calls)
        elif kind == "tool":
            mark = "x" if message.status == "error" else "<-"
            self.line(f"  {mark} {message.name or 'tool'}: {_short(message.text)}")

    def _flush_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for chunk in pending.values():
            message = chunk.to_message()
            self._show_calls(message.tool_calls)
            for bad in message.invalid_tool_calls:
                self.line(f"  x invalid tool call {bad.get('name')}: {bad.get('args')}")


def new_view(show: str = "messages") -> RunView:
    """A ``RunView`` on stdout (progress redrawn in place on a terminal)."""
    tty = sys.stdout.isatty()
    return RunView(sys.stdout, show=show, tty=tty, quiet_s=2.0 if tty else 5.0)


def stream_run(graph: Any, value: Any, thread_id: str, view: RunView,
               extra_modes: tuple[str, ...] = (), config: dict[str, Any] | None = None) -> None:
    """Stream one run of ``graph`` on ``thread_id`` into ``view`` (updates, messages and
    debug, whose task events give the view each node's super-step).

    The run goes through ``astream`` under ``asyncio.run``, so Ctrl-C cancels the running
    nodes cleanly (the thread keeps its last checkpoint) and then raises
    ``KeyboardInterrupt`` here.
    """
    base = ("updates", "messages", "debug")
    modes = [*base, *[m for m in extra_modes if m not in base]]

    async def consume() -> None:
        with view:
            async for mode, chunk in graph.astream(value, config, thread_id=thread_id,
                                                   stream_mode=modes):
                view.handle(mode, chunk)

    asyncio.run(consume())
