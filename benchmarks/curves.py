"""Cost curves: how per-unit cost grows with the work, threadloom and LangGraph side by side.

Usage::

    python benchmarks/curves.py [C1 C2 ...] [--quick] [--rounds N] [--json PATH]

Each curve runs at several sizes; both sides run in this one process, in turn (threadloom,
LangGraph, threadloom, ...) for ``--rounds`` rounds, and each figure is the median of its
side's rounds (each round's figure is itself a median of repeated calls where a call is
short). The table gives the ratio per size and the growth order of each side's per-unit
figure from the two largest sizes: ``log(f2 / f1) / log(n2 / n1)``, 0 when the cost per
unit stays flat, 1 when it grows in proportion to the size. PostgreSQL curves also give
SQL statements and round trips per super-step, counted from libpq's protocol trace
(deterministic). Exit status: 0 all ran, 1 a side raised.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import operator
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import curve_sides as cs
import harness as h

PG_STEPS = "ms per super-step"
PG_STATEMENTS = "SQL statements per super-step"
PG_TRIPS = "round trips per super-step"


class _Counter(TypedDict):
    n: int


class _Fan(TypedDict):
    n: int
    total: Annotated[int, operator.add]


class _Items(TypedDict):
    n: int
    items: Annotated[list, operator.add]


def _tid() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"curve-{uuid.uuid4().hex}"}}


def _loop_graph(side: cs.Side, steps: int, saver: Any) -> Any:
    """The W2 graph: a -> b -> a ..., each adding 1 to n, ending at n >= steps."""
    g = side.StateGraph(_Counter)
    g.add_node("a", lambda s: {"n": s["n"] + 1})
    g.add_node("b", lambda s: {"n": s["n"] + 1})
    g.add_edge(side.START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: side.END if s["n"] >= steps else "a")
    return g.compile(checkpointer=saver)


def _cfg(side: cs.Side, limit: int, config: dict[str, Any] | None = None) -> dict[str, Any]:
    cfg = dict(config or _tid())
    cfg["recursion_limit"] = limit + 10
    return cfg


def _reps(size: int, budget: int) -> int:
    return max(1, min(5, budget // size))


# --- C1, C2: PostgreSQL super-steps ------------------------------------------------------


def c1_pg_invoke(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """A ``size``-step 2-node loop on PostgreSQL, sync ``invoke``."""
    saver, pgconn = side.postgres()
    graph = _loop_graph(side, size, saver)

    def run() -> None:
        if graph.invoke({"n": 0}, _cfg(side, size), **side.run_kwargs)["n"] != size:
            raise RuntimeError(f"{side.name}: loop stopped at the wrong step")

    try:
        run()
        times = h.time_calls(lambda _i: run(), _reps(size, 200 if quick else 2000))
        with cs.PgTrace(pgconn) as trace:
            run()
    finally:
        close = getattr(saver, "close", None)
        if close is not None:
            close()
    return {PG_STEPS: statistics.median(times) / size * 1e3,
            PG_STATEMENTS: trace.statements / size, PG_TRIPS: trace.round_trips / size}


def c2_pg_ainvoke(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """A ``size``-step 2-node loop on PostgreSQL, ``ainvoke`` (async checkpointer)."""

    async def main() -> dict[str, float]:
        saver, pgconn, aclose = await side.apostgres()
        graph = _loop_graph(side, size, saver)

        async def run() -> None:
            out = await graph.ainvoke({"n": 0}, _cfg(side, size), **side.run_kwargs)
            if out["n"] != size:
                raise RuntimeError(f"{side.name}: loop stopped at the wrong step")

        try:
            await run()
            times = []
            for _ in range(_reps(size, 200 if quick else 2000)):
                start = time.perf_counter()
                await run()
                times.append(time.perf_counter() - start)
            with cs.PgTrace(pgconn) as trace:
                await run()
        finally:
            await aclose()
        return {PG_STEPS: statistics.median(times) / size * 1e3,
                PG_STATEMENTS: trace.statements / size, PG_TRIPS: trace.round_trips / size}

    return asyncio.run(main())


# --- C3, C7: reading a long thread (SQLite file) ------------------------------------------

_THREADS: dict[tuple[str, int], tuple[Any, dict[str, Any]]] = {}


def _long_thread(side: cs.Side, size: int) -> tuple[Any, dict[str, Any]]:
    """A graph and the config of a thread holding about ``size`` checkpoints (built once
    per side and size, untimed)."""
    key = (side.name, size)
    if key not in _THREADS:
        saver = side.sqlite(cs.temp_path(f"{side.name}-{size}.sqlite"))
        graph = _loop_graph(side, size, saver)
        config = _tid()
        graph.invoke({"n": 0}, _cfg(side, size, config), **side.run_kwargs)
        _THREADS[key] = (graph, config)
    return _THREADS[key]


def c3_get_state(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """Sync ``get_state`` of a thread of ``size`` checkpoints (SQLite file)."""
    graph, config = _long_thread(side, size)
    if graph.get_state(config).values["n"] != size:
        raise RuntimeError(f"{side.name}: get_state read the wrong state")
    times = h.time_calls(lambda _i: graph.get_state(config), 50 if quick else 300)
    return {"ms per get_state": statistics.median(times) * 1e3}


def c7_history(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """The full ``get_state_history`` of a thread of ``size`` checkpoints, per checkpoint."""
    graph, config = _long_thread(side, size)
    count = len(list(graph.get_state_history(config)))
    if count < size:
        raise RuntimeError(f"{side.name}: history holds {count} checkpoints")
    times = h.time_calls(lambda _i: list(graph.get_state_history(config)), 1 if quick else 3)
    return {"us per checkpoint": statistics.median(times) / count * 1e6}


# --- C4: Send fan-out ---------------------------------------------------------------------


def c4_send(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """``size`` Send packets from START to one worker node, no checkpointer."""
    g = side.StateGraph(_Fan)
    g.add_node("work", lambda s: {"total": 1})
    g.add_conditional_edges(side.START, lambda s: [side.Send("work", {"n": i})
                                                   for i in range(s["n"])])
    g.add_edge("work", side.END)
    graph = g.compile()

    def run(_i: int) -> None:
        if graph.invoke({"n": size, "total": 0})["total"] != size:
            raise RuntimeError(f"{side.name}: fan-out lost packets")

    run(-1)
    times = h.time_calls(run, _reps(size, 5000 if quick else 30_000))
    return {"us per packet": statistics.median(times) / size * 1e6}


# --- C5: token streaming ------------------------------------------------------------------


def c5_messages(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """``stream_mode="messages"`` of one model reply of ``size`` words, per chunk."""
    model = side.chat_model(" ".join(["tok"] * size))
    g = side.StateGraph(_Items)
    g.add_node("model", lambda s: {"items": [model.invoke("hi")]})
    g.add_edge(side.START, "model")
    g.add_edge("model", side.END)
    graph = g.compile()
    counted: list[int] = []

    def run(_i: int) -> None:
        counted.append(sum(1 for _ in graph.stream({"n": 0, "items": []},
                                                   stream_mode="messages")))

    run(-1)
    if counted[0] < size:
        raise RuntimeError(f"{side.name}: {counted[0]} chunks for {size} words")
    times = h.time_calls(run, _reps(size, 2000 if quick else 200_000))
    return {"us per chunk": statistics.median(times) / counted[0] * 1e6}


# --- C6: a long list in state ---------------------------------------------------------------

C6_STEPS = 20


def c6_list(side: cs.Side, size: int, quick: bool) -> dict[str, float]:
    """Steps appending one item to a ``size``-item list (in-memory checkpointer)."""
    g = side.StateGraph(_Items)
    g.add_node("a", lambda s: {"n": s["n"] + 1, "items": [s["n"]]})
    g.add_edge(side.START, "a")
    g.add_conditional_edges("a", lambda s: side.END if s["n"] >= C6_STEPS else "a")
    graph = g.compile(checkpointer=side.memory())
    config = _cfg(side, C6_STEPS)
    graph.invoke({"n": 0, "items": list(range(size))}, config, **side.run_kwargs)

    def run(_i: int) -> None:
        graph.invoke({"n": 0}, config, **side.run_kwargs)

    run(-1)
    times = h.time_calls(run, 3 if quick else 5)
    if len(graph.get_state(config).values["items"]) != size + C6_STEPS * (2 + len(times)):
        raise RuntimeError(f"{side.name}: the list lost items")
    return {"ms per step": statistics.median(times) / C6_STEPS * 1e3}


@dataclass(frozen=True)
class Curve:
    """One curve: a function of (side, size, quick) and its sizes (full, quick)."""

    name: str
    title: str
    fn: Callable[[cs.Side, int, bool], dict[str, float]]
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    peer: str


CURVES = {c.name: c for c in (
    Curve("C1", "PostgreSQL 2-node loop, invoke (super-steps)", c1_pg_invoke,
          (10, 100, 1000), (10, 50), "langgraph-postgres"),
    Curve("C2", "PostgreSQL 2-node loop, ainvoke (super-steps)", c2_pg_ainvoke,
          (10, 30, 100), (10, 50), "langgraph-postgres"),
    Curve("C3", "get_state, SQLite thread of N checkpoints", c3_get_state,
          (100, 1000, 10_000), (100, 500), "langgraph-sqlite"),
    Curve("C4", "Send fan-out of N packets, no checkpointer", c4_send,
          (1000, 5000, 10_000), (500, 1000), "langgraph"),
    Curve("C5", 'stream_mode="messages", N-word reply', c5_messages,
          (100, 1000, 10_000, 100_000), (100, 1000), "langgraph"),
    Curve("C6", "step appending to an N-item list, in-memory checkpointer", c6_list,
          (1000, 10_000, 100_000), (1000, 10_000), "langgraph"),
    Curve("C7", "full get_state_history, SQLite thread of N checkpoints", c7_history,
          (100, 1000, 10_000), (100, 500), "langgraph-sqlite"),
)}


def growth_order(points: dict[int, float]) -> float | None:
    """``log(f2 / f1) / log(n2 / n1)`` over the two largest sizes (0: flat per unit)."""
    if len(points) < 2:
        return None
    (n1, f1), (n2, f2) = sorted(points.items())[-2:]
    if f1 <= 0 or f2 <= 0:
        return None
    return math.log(f2 / f1) / math.log(n2 / n1)


def _measure(curve: Curve, side: cs.Side, size: int, quick: bool) -> dict[str, float] | str:
    print(f"  {curve.name} {side.name} N={size} ...", file=sys.stderr, flush=True)
    try:
        return curve.fn(side, size, quick)
    except Exception as exc:  # a failing side is reported in its cell, the rest still runs
        traceback.print_exc(file=sys.stderr)
        return f"error: {type(exc).__name__}: {exc}"[:160]


def run_curve(curve: Curve, sides: list[cs.Side], quick: bool,
              rounds: int) -> dict[str, dict[int, dict[str, float] | str]]:
    """Every size of ``curve`` on every side, sides in turn, ``rounds`` times; each side's
    median per size and metric."""
    sizes = curve.quick_sizes if quick else curve.sizes
    raw: dict[str, dict[int, list[Any]]] = {s.name: {n: [] for n in sizes} for s in sides}
    for _ in range(rounds):
        for side in sides:
            for n in sizes:
                raw[side.name][n].append(_measure(curve, side, n, quick))
    out: dict[str, dict[int, dict[str, float] | str]] = {}
    for name, by_size in raw.items():
        out[name] = {}
        for n, results in by_size.items():
            texts = [r for r in results if isinstance(r, str)]
            out[name][n] = texts[0] if texts else {
                m: statistics.median(r[m] for r in results) for m in results[0]}
    return out


def rows_of(curve: Curve, result: dict[str, dict[int, Any]]) -> list[list[str]]:
    """Table rows of one curve: a row per size and metric, then the growth orders."""
    tl = result.get("threadloom", {})
    lg = result.get("LangGraph", {})
    rows: list[list[str]] = []
    metrics = list(dict.fromkeys(m for side in (tl, lg) for r in side.values()
                                 if isinstance(r, dict) for m in r))
    for metric in metrics:
        series: dict[str, dict[int, float]] = {"tl": {}, "lg": {}}
        for n in sorted(set(tl) | set(lg)):
            cells = []
            for key, side in (("tl", tl), ("lg", lg)):
                r = side.get(n, h.NOT_INSTALLED)
                value = r.get(metric) if isinstance(r, dict) else r
                if isinstance(value, float):
                    series[key][n] = value
                cells.append(value)
            rows.append([curve.name, f"{n:,}", metric, h.format_value(cells[0]),
                         h.format_value(cells[1]), h.ratio_cell(cells[0], cells[1])])
        if metric not in (PG_STATEMENTS, PG_TRIPS):
            orders = [growth_order(series[k]) for k in ("tl", "lg")]
            rows.append([curve.name, "growth order", metric,
                         *("-" if o is None else f"{o:+.2f}" for o in orders), ""])
    return rows


HEADER = ("curve", "N", "metric", "threadloom", "LangGraph", "LangGraph / threadloom")


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the curves and print the side-by-side table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="*", metavar="C", help="C1..C7 (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, same shapes")
    parser.add_argument("--rounds", type=int, default=1, metavar="N")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    names = [n.upper() for n in args.curves] or list(CURVES)
    unknown = [n for n in names if n not in CURVES]
    if unknown:
        parser.error(f"unknown curve(s) {unknown}; choose from {list(CURVES)}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    rows: list[list[str]] = []
    results: dict[str, Any] = {}
    for name in names:
        curve = CURVES[name]
        print(f"{name}: {curve.title}", file=sys.stderr, flush=True)
        sides = [cs.threadloom_side()]
        if h.peer_available(curve.peer):
            sides.append(cs.langgraph_side())
        results[name] = run_curve(curve, sides, args.quick, args.rounds)
        rows += rows_of(curve, results[name])
    versions = h.peer_versions(sorted({CURVES[n].peer for n in names}))
    print(f"{'quick' if args.quick else 'full'} sizes, median of {args.rounds} round(s); "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(h.render_table(rows, HEADER))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"quick": args.quick, "rounds": args.rounds, "versions": versions,
                       "results": {c: {s: {str(n): v for n, v in r.items()}
                                       for s, r in res.items()}
                                   for c, res in results.items()}}, fh, indent=2)
    failed = any(isinstance(v, str) and v.startswith("error")
                 for res in results.values() for r in res.values() for v in r.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
