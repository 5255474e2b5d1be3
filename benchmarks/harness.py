"""Timing, memory and table helpers shared by both sides of every benchmark workload.

Everything a workload definition needs on *both* sides (counts, message texts, the
scripted agent's decision rule) lives here, so threadloom and its peers measure exactly
the same work.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import importlib.util
import os
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Peer name -> modules that must all be importable for that peer's column to run.
PEER_MODULES: dict[str, tuple[str, ...]] = {
    "langgraph": ("langgraph.graph",),
    "langgraph-sqlite": ("langgraph.graph", "langgraph.checkpoint.sqlite"),
    "langgraph-postgres": ("langgraph.graph", "langgraph.checkpoint.postgres"),
    "langchain": ("langchain.agents", "langgraph.checkpoint.memory"),
    "haystack": ("haystack.components.agents",),
    "psutil": ("psutil",),
}
# Peer name -> distribution names whose versions the report prints.
PEER_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "langgraph": ("langgraph",),
    "langgraph-sqlite": ("langgraph-checkpoint-sqlite",),
    "langgraph-postgres": ("langgraph-checkpoint-postgres",),
    "langchain": ("langchain", "langchain-core"),
    "haystack": ("haystack-ai",),
}

NOT_INSTALLED = "not installed"


@dataclass(frozen=True)
class Counts:
    """How much work each workload does; `--quick` shrinks the counts, never the shape.

    Attributes:
        w1_nodes: nodes in the W1 chain.
        w1_invokes: timed W1 invocations (after one warm-up).
        w2_steps: super-steps of one W2 run (the loop stops when ``n >= w2_steps``).
        w2_invokes: timed W2 runs per variant (after one warm-up).
        w3_turns: turns of the single W3 thread.
        w3_marks: turns at which W3 reports bytes on disk and ms per turn.
        w3_window: turns averaged for the ms-per-turn figure at each mark.
        agent_runs: timed runs of W4/W5 (after one warm-up).
        w6_runs: concurrent ``ainvoke`` runs in W6.
        w6_delay_s: seconds the W6 model awaits per call.
        w7_threads: threads stored in W7.
        w7_turns: turns per W7 thread (each adds one user and one assistant message).
    """

    w1_nodes: int = 100
    w1_invokes: int = 200
    w2_steps: int = 1000
    w2_invokes: int = 5
    w3_turns: int = 200
    w3_marks: tuple[int, ...] = (25, 50, 100, 200)
    w3_window: int = 5
    agent_runs: int = 200
    w6_runs: int = 500
    w6_delay_s: float = 0.02
    w7_threads: int = 10_000
    w7_turns: int = 5


FULL = Counts()
QUICK = Counts(
    w1_invokes=20,
    w2_invokes=1,
    w3_turns=50,
    w3_marks=(25, 50),
    agent_runs=20,
    w6_runs=50,
    w7_threads=500,
)


def counts(quick: bool) -> Counts:
    """Return the counts for a full run, or the smaller `--quick` ones."""
    return QUICK if quick else FULL


# --- shared workload content -------------------------------------------------------

MESSAGE_CHARS = 200
AGENT_TOOL_CALLS = 3  # the scripted model calls the tool this many times, then answers
AGENT_ANSWER = "The counter reached 3."
TOOL_NAME = "bump"
TOOL_DESCRIPTION = "Return x plus one."
_WORDS = (
    "graph node state thread message tool agent reply token stream step channel "
    "reducer checkpoint model call value update write read store"
).split()


# Metric names: both sides of a workload report under exactly these keys.
W1_STEP = "us per node-step"
W2_PLAIN = "no checkpointer: us per super-step"
W2_MEMORY = "in-memory checkpointer: us per super-step"
AGENT_PLAIN = "no checkpointer: ms per run"
AGENT_MEMORY = "in-memory checkpointer: ms per run"
W7_PER_THREAD = "KB RSS per thread"


def w6_total(c: Counts) -> str:
    """W6 metric name: total seconds for all concurrent runs, with the ideal time."""
    ideal_ms = (AGENT_TOOL_CALLS + 1) * c.w6_delay_s * 1000
    return f"{c.w6_runs} concurrent runs: total s (ideal {ideal_ms:.0f} ms)"


def w3_ms(turn: int) -> str:
    """W3 metric name: ms per turn around `turn`."""
    return f"turn {turn}: ms per turn"


def w3_mb(turn: int) -> str:
    """W3 metric name: MB on disk after `turn`."""
    return f"turn {turn}: MB on disk"


def make_text(seed: int, length: int = MESSAGE_CHARS) -> str:
    """Return a deterministic, word-like text of exactly `length` characters.

    Args:
        seed: picks the words; the same seed always gives the same text.
        length: characters in the result.
    """
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_WORDS)
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:length]


def bump(x: int) -> int:
    """The trivial tool every agent workload calls: return x plus one."""
    return x + 1


def agent_decision(tool_results_since_user: int) -> int | None:
    """The scripted model's rule, identical on every side.

    Args:
        tool_results_since_user: tool-result messages after the last user message.

    Returns:
        The argument ``x`` of the next tool call, or None when the model should answer.
    """
    if tool_results_since_user < AGENT_TOOL_CALLS:
        return tool_results_since_user
    return None


def tool_call_id(x: int) -> str:
    """Return the tool-call id the scripted model uses for its call with argument x."""
    return f"call_{x}"


# --- timing and memory -------------------------------------------------------------


def time_calls(
    fn: Callable[[int], Any], n: int, after: Callable[[int], Any] | None = None
) -> list[float]:
    """Call ``fn(i)`` for i in range(n) and return each call's wall-clock seconds.

    Args:
        fn: the timed work, given the call index.
        n: number of calls.
        after: untimed work run after each call (given the index), e.g. measuring disk.
    """
    out: list[float] = []
    clock = time.perf_counter
    for i in range(n):
        start = clock()
        fn(i)
        out.append(clock() - start)
        if after is not None:
            after(i)
    return out


def best_of(fn: Callable[[], Any], repeat: int = 3) -> float:
    """Return the smallest wall-clock seconds of `repeat` calls of `fn`."""
    return min(time_calls(lambda _i: fn(), repeat))


def median_of(fn: Callable[[], Any], repeat: int = 5) -> float:
    """Return the median wall-clock seconds of `repeat` calls of `fn`."""
    return statistics.median(time_calls(lambda _i: fn(), repeat))


def median_per(times: Sequence[float], units: int, scale: float) -> float:
    """Median of per-call seconds, divided by the `units` of work in one call, times `scale`.

    Example: ``median_per(times, 100, 1e6)`` is microseconds per node-step of a 100-node
    chain. The median keeps one slow call (a GC pause, a busy neighbour) from moving it.
    """
    return statistics.median(times) / units * scale


def window_mean(samples: Sequence[float], end: int, window: int) -> float:
    """Mean of ``samples[end - window:end]`` (the last `window` samples up to `end`)."""
    chunk = samples[max(0, end - window) : end]
    return sum(chunk) / len(chunk)


def concurrent_seconds(one: Callable[[], Awaitable[Any]], n: int) -> float:
    """Seconds for `n` concurrent ``one()`` coroutines in a fresh event loop.

    One run of ``one()`` first warms the caches and is not timed; a full garbage
    collection then starts every side's timed batch from the same clean state.
    """

    async def main() -> float:
        await one()
        gc.collect()
        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return time.perf_counter() - start

    return asyncio.run(main())


def rss_bytes() -> int:
    """Resident set size of this process in bytes (psutil, else /proc/self/statm)."""
    if importlib.util.find_spec("psutil") is not None:
        import psutil

        return int(psutil.Process().memory_info().rss)
    with open("/proc/self/statm") as fh:
        resident_pages = int(fh.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def settled_rss() -> int:
    """RSS in bytes after a full garbage collection."""
    gc.collect()
    gc.collect()
    return rss_bytes()


def sqlite_bytes(path: str | os.PathLike[str], *, flush_wal: bool = True) -> int:
    """Bytes on disk of a SQLite database: the file plus its -wal and -shm files.

    Args:
        path: the database file.
        flush_wal: first copy the write-ahead log into the database and truncate it
            (``PRAGMA wal_checkpoint(TRUNCATE)`` on a separate connection), so the figure
            measures stored data, not how much of the last ~4 MB of WAL is still pending.
    """
    base = Path(path)
    if flush_wal:
        conn = sqlite3.connect(base)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    total = 0
    for candidate in (base, Path(f"{base}-wal"), Path(f"{base}-shm")):
        if candidate.exists():
            total += candidate.stat().st_size
    return total


# --- peers -------------------------------------------------------------------------


def peer_available(name: str) -> bool:
    """True when every module the peer `name` needs (see PEER_MODULES) can be imported.

    Raises:
        KeyError: for a peer name this harness does not know.
    """
    for module in PEER_MODULES[name]:
        if module in sys.modules:  # already imported (lazy modules may lack __spec__)
            continue
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except (ModuleNotFoundError, ValueError):
            return False
    return True


def peer_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed versions of the distributions behind the peers `names`."""
    out: dict[str, str] = {}
    for name in names:
        for dist in PEER_DISTRIBUTIONS.get(name, ()):
            try:
                out[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                out[dist] = NOT_INSTALLED
    return out


# --- table -------------------------------------------------------------------------

HEADER = ("workload", "metric", "threadloom", "peer", "peer value", "peer / threadloom")


def format_value(value: float | str | None) -> str:
    """Format a measured number with 3 significant figures; strings pass through."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def ratio_cell(tl: float | str | None, peer: float | str | None) -> str:
    """The ``peer / threadloom`` cell: how many times more the peer costs (lower is better)."""
    if isinstance(tl, (int, float)) and isinstance(peer, (int, float)) and tl > 0:
        return f"{peer / tl:.1f}x"
    return "n/a"


def render_table(rows: Sequence[Sequence[str]], header: Sequence[str] = HEADER) -> str:
    """Render rows as a Markdown table (readable in a terminal, pasteable in a note)."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep, *(line(r) for r in rows)])
