"""Run benchmark workloads side by side: threadloom first, then each peer, same process.

Usage::

    python benchmarks/run.py [W1 W2 ...] [--quick] [--rounds N] [--json PATH]

With no names every workload runs. W7 measures resident memory, so each of its sides runs
in a fresh subprocess. Exit status: 0 when every available side ran, 1 when a side raised,
2 when a threadloom side could not be imported (the peers still run and are printed).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness as h
import peers

try:
    import tl_workloads
except ImportError as exc:  # the engine has not landed yet, or a public name is missing
    tl_workloads = None
    TL_IMPORT_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    TL_IMPORT_ERROR = None

HERE = Path(__file__).resolve().parent
NOT_AVAILABLE = "not available"
CHILD_IMPORT_ERROR = 3  # exit status of a --child run whose threadloom import failed


@dataclass(frozen=True)
class Workload:
    """One workload: the threadloom function name and its peers (label, peer, function)."""

    name: str
    title: str
    tl: str
    peers: tuple[tuple[str, str, str], ...]
    subprocess: bool = False


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("W1", "chain of 100 trivial nodes", "w1",
                 (("LangGraph", "langgraph", "w1_langgraph"),)),
        Workload("W2", "a <-> b loop, 1,000 super-steps", "w2",
                 (("LangGraph", "langgraph", "w2_langgraph"),)),
        Workload("W3", "one thread, SQLite file, user+assistant turns", "w3",
                 (("LangGraph SqliteSaver", "langgraph-sqlite", "w3_langgraph"),)),
        Workload("W4", "agent: 3 tool calls then answer", "w4",
                 (("LangChain create_agent", "langchain", "w4_langchain"),)),
        Workload("W5", "agent: 3 tool calls then answer", "w5",
                 (("Haystack Agent", "haystack", "w5_haystack"),)),
        Workload("W6", "concurrent ainvoke, model awaits 20 ms per call", "w6",
                 (("LangChain create_agent", "langchain", "w6_langchain"),
                  ("Haystack Agent", "haystack", "w6_haystack"))),
        Workload("W7", "10 messages per thread, in-memory checkpointer", "w7",
                 (("LangGraph InMemorySaver", "langgraph", "w7_langgraph"),), subprocess=True),
    )
}

Result = dict[str, float] | str  # metrics, or a cell text saying why there are none


def _call(side: str, func: str, quick: bool, fresh_process: bool) -> dict[str, float]:
    if fresh_process:
        cmd = [sys.executable, str(HERE / "run.py"), "--child", f"{side}:{func}"]
        proc = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True,
                              text=True, check=False)
        if proc.returncode == CHILD_IMPORT_ERROR:
            raise ImportError(proc.stdout.strip().splitlines()[-1])
        if proc.returncode != 0:
            raise RuntimeError(f"child process failed: {proc.stderr.strip()[-400:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    module: Any = tl_workloads if side == "tl" else peers
    fn: Callable[[h.Counts], dict[str, float]] = getattr(module, func)
    return fn(h.counts(quick))


def _measure(side: str, func: str, quick: bool, fresh: bool, label: str) -> Result:
    print(f"  running {label} ...", file=sys.stderr, flush=True)
    try:
        return _call(side, func, quick, fresh)
    except ImportError as exc:  # a public name this workload needs has not landed yet
        if side != "tl":
            raise
        print(f"{func.upper()}: threadloom side not available: {type(exc).__name__}: {exc}",
              flush=True)
        return NOT_AVAILABLE
    except Exception as exc:  # a failing side is reported in its cell, the rest still runs
        traceback.print_exc(file=sys.stderr)
        return f"error: {type(exc).__name__}: {exc}"[:160]


def median_result(results: list[Result]) -> Result:
    """Combine the rounds of one side: the median of each metric, or the first round's
    cell text when a round has no figures (an error, not available)."""
    texts = [r for r in results if not isinstance(r, dict)]
    if texts:
        return texts[0]
    metrics = list(dict.fromkeys(m for r in results for m in r))  # type: ignore[union-attr]
    return {m: statistics.median(r[m] for r in results if m in r)  # type: ignore[index, operator]
            for m in metrics}


def run_workload(w: Workload, quick: bool,
                 rounds: int = 1) -> tuple[list[list[str]], list[dict[str, Any]]]:
    """Run one workload on threadloom, then on each peer, ``rounds`` times in turn (so a
    slow spell of a shared machine falls on both sides); return table rows and records
    holding each side's median over the rounds."""
    print(f"{w.name}: {w.title}", file=sys.stderr, flush=True)
    if tl_workloads is None:
        print(f"{w.name}: threadloom side not available: {TL_IMPORT_ERROR}", flush=True)
    present = [(label, func) for label, peer, func in w.peers if h.peer_available(peer)]
    mine_runs: list[Result] = []
    their_runs: dict[str, list[Result]] = {label: [] for label, _ in present}
    for _ in range(rounds):
        if tl_workloads is None:
            mine_runs.append(NOT_AVAILABLE)
        else:
            mine_runs.append(_measure("tl", w.tl, quick, w.subprocess, "threadloom"))
        for label, func in present:
            their_runs[label].append(_measure("peer", func, quick, w.subprocess, label))
    tl = median_result(mine_runs)
    rows: list[list[str]] = []
    records: list[dict[str, Any]] = []
    for label, _peer, _func in w.peers:
        theirs = median_result(their_runs[label]) if label in their_runs else h.NOT_INSTALLED
        metrics = list(tl) if isinstance(tl, dict) else []
        metrics += [m for m in (theirs if isinstance(theirs, dict) else {}) if m not in metrics]
        for metric in metrics or ["-"]:
            mine = tl.get(metric) if isinstance(tl, dict) else tl
            other = theirs.get(metric) if isinstance(theirs, dict) else theirs
            rows.append([w.name, metric, h.format_value(mine), label, h.format_value(other),
                         h.ratio_cell(mine, other)])
            records.append({"workload": w.name, "metric": metric, "threadloom": mine,
                            "peer": label, "peer_value": other})
    return rows, records


def _child(spec: str, quick: bool) -> int:
    side, func = spec.split(":", 1)
    if side == "tl" and tl_workloads is None:
        print(TL_IMPORT_ERROR)
        return CHILD_IMPORT_ERROR
    try:
        result = _call(side, func, quick, fresh_process=False)
    except ImportError as exc:
        print(f"{type(exc).__name__}: {exc}")
        return CHILD_IMPORT_ERROR
    print(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the workloads and print the side-by-side table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", metavar="W", help="W1..W7 (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller counts, same shapes")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--rounds", type=int, default=1, metavar="N",
                        help="run the sides in turn N times and report each side's median "
                             "(steadier figures on a shared machine; default 1)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.quick)
    names = [n.upper() for n in args.workloads] or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    rows: list[list[str]] = []
    records: list[dict[str, Any]] = []
    for name in names:
        r, rec = run_workload(WORKLOADS[name], args.quick, args.rounds)
        rows += r
        records += rec
    peer_names = {p for n in names for _, p, _ in WORKLOADS[n].peers}
    versions = h.peer_versions(sorted(peer_names))
    rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
    print(f"python {platform.python_version()}, {'quick' if args.quick else 'full'} counts"
          f"{rounds}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(h.render_table(rows))
    if args.json:
        args.json.write_text(json.dumps({"versions": versions, "quick": args.quick,
                                         "rounds": args.rounds,
                                         "threadloom_import_error": TL_IMPORT_ERROR,
                                         "results": records}, indent=2))
    if any(isinstance(r["threadloom"], str) and r["threadloom"].startswith("error")
           or isinstance(r["peer_value"], str) and r["peer_value"].startswith("error")
           for r in records):
        return 1
    return 2 if any(r["threadloom"] == NOT_AVAILABLE for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
