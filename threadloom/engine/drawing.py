"""Drawings of a graph: Mermaid text, and a PNG rendered offline with matplotlib.

The PNG uses a layered layout in the manner of Sugiyama's method (as graphviz ``dot``
does): loops are set aside, every node gets the layer of its longest path from
``START``, an edge that skips layers passes through a slot of its own in each layer it
crosses (so it never runs through a node), and a few barycenter sweeps order each layer
to cut crossings. Loop edges are drawn as arcs; conditional edges are dashed and carry
their path-map label.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import networkx as nx

from threadloom.engine.analysis import graph_edges, to_networkx
from threadloom.engine.lgdraw import Drawn
from threadloom.engine.mermaid import mermaid_text, to_json
from threadloom.types import END, START

__all__ = ["DrawableGraph"]

_NODE_SIZE = 2600  # matplotlib marker area, points^2
_RADIUS = _NODE_SIZE**0.5 / 2  # a node circle's radius, points (a marker s is sqrt(s) wide)
_RADIUS_PT = 27.0  # where an arrow stops short of a node's centre, points
_SWEEPS = 4
_ARC = -0.45  # the bend of a loop arc between adjacent layers (matplotlib's arc3 rad)


class DrawableGraph:
    """A read-only view of a compiled graph for drawing.

    Attributes:
        nodes: node names, ``START`` and ``END`` included.
        edges: ``DrawnEdge`` items.
    """

    def __init__(self, graph: Any, name: str = "graph", drawn: Drawn | None = None) -> None:
        self.name = name
        self.nodes = [START, *graph.nodes, END]
        self.edges = graph_edges(graph)
        self._nx = to_networkx(graph)
        self._drawn = drawn

    def to_json(self) -> dict[str, Any]:
        """``{"nodes": [...], "edges": [...]}`` as LangGraph's ``Graph.to_json``."""
        if self._drawn is None:
            raise ValueError("this drawing has no LangGraph view; use CompiledGraph.get_graph()")
        return to_json(self._drawn)

    def to_networkx(self) -> nx.DiGraph:
        """The underlying ``networkx.DiGraph``."""
        return self._nx

    def draw_mermaid(self, **options: Any) -> str:
        """Mermaid text as LangGraph's ``draw_mermaid`` writes it (``with_styles``,
        ``curve_style``, ``node_colors``, ``wrap_label_n_words``, ``frontmatter_config``)."""
        if self._drawn is None:
            raise ValueError("this drawing has no LangGraph view; use CompiledGraph.get_graph()")
        return mermaid_text(self._drawn, **options)

    def draw_png(self, path: str | None = None) -> bytes:
        """Render a PNG offline with matplotlib (the ``draw`` extra); returns its bytes.

        Args:
            path: also write the PNG to this file (None: only return it).

        Raises:
            ImportError: when matplotlib is not installed.
            OSError: ``path`` cannot be written.
        """
        import io

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        layout = _Layout(self._nx)
        pos = layout.pos
        real = list(self._nx.nodes)
        xs = [pos[n][0] for n in pos]
        width = max(xs) - min(xs) + 1
        fig, ax = plt.subplots(figsize=(max(4.0, 1.9 * width), 1.35 * (layout.depth + 1)))
        colors = ["#bfb6fc" if n in (START, END) else "#f2f0ff" for n in real]
        nx.draw_networkx_nodes(self._nx, {n: pos[n] for n in real}, ax=ax, nodelist=real,
                               node_color=colors, node_size=_NODE_SIZE, edgecolors="#555")
        for n in real:
            text, size = _fit_label(str(n), _text_width)
            ax.text(*pos[n], text, fontsize=size, ha="center", va="center",
                    multialignment="center")
        labels = _labels(self.edges)
        for a, b, data in self._nx.edges(data=True):
            style = _EdgeStyle(bool(data.get("conditional")))
            if (a, b) in layout.loops and len(layout.route(a, b)) == 2:
                _draw_loop(ax, pos[a], pos[b], style)
            else:
                _draw_path(ax, [pos[p] for p in layout.route(a, b)], style)
            label = labels.get((a, b))
            if label:
                _draw_label(ax, *_label_anchor(layout, a, b), label)
        ax.set_title(self.name)
        ys = [pos[n][1] for n in pos]  # the limits hold long edges' slots too
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
        ax.set_ylim(min(ys) - 0.5, max(ys) + 0.5)
        ax.axis("off")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight", dpi=120)
        plt.close(fig)
        data = buf.getvalue()
        if path is not None:
            with open(path, "wb") as fh:
                fh.write(data)
        return data


def _fit_label(name: str, measure: Any) -> tuple[str, float]:
    """A node name as lines that fit inside its circle, and the font size (points).

    Lines break after ``_``, ``-`` or a space where they can, else anywhere; the font
    shrinks from 8 to 5 points before a name too long even then is cut with an ellipsis.
    A block fits when its diagonal is within the circle's diameter; ``measure(line,
    size)`` gives a line's width in points (a line is 1.2 em high).
    """
    room = 2 * _RADIUS - 6  # the circle's diameter less a margin, points

    def fits(lines: list[str], size: float) -> bool:
        wide = max(measure(line, size) for line in lines)
        high = len(lines) * 1.2 * size
        return wide * wide + high * high <= room * room

    lines: list[str] = []
    for cut_words in (False, True):  # a smaller font before a word cut in two
        for size in (8.0, 7.0, 6.0, 5.0):
            for per_line in range(int(room / (0.5 * size)), 1, -1):
                lines = _wrap(name, per_line, cut_words)
                if lines and fits(lines, size):
                    return "\n".join(lines), size
    # too long for any size: lines as wide as the square inside the circle, at 5 points,
    # as many as fit, the last ending in "…"
    side = room / 2**0.5
    per_line = max(n for n in range(1, len(name) + 1)
                   if n == 1 or measure(name[:n], 5.0) <= side)
    lines = _wrap(name, per_line, True)
    while len(lines) > 1 and not fits(lines, 5.0):
        lines = [*lines[:-2], lines[-2][:-1] + "\u2026"]
    return "\n".join(lines), 5.0


def _text_width(line: str, size: float) -> float:
    """A line's width in points in matplotlib's default font (the sum of its
    characters' advances; kerning is ignored)."""
    return sum(_char_width(c) for c in line) * size


@functools.cache
def _char_width(char: str) -> float:
    """A character's advance in matplotlib's default font, in em."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    return TextToPath().get_text_width_height_descent(
        char, FontProperties(size=100), ismath=False)[0] / 100


def _wrap(name: str, per_line: int, cut_words: bool) -> list[str]:
    """``name`` in lines of at most ``per_line`` characters, broken after separators; a
    word longer than a line is cut when ``cut_words`` (else: ``[]``, no wrapping fits)."""
    lines: list[str] = []
    line = ""
    for word in re.findall(r"[^_\-\s]*[_\-\s]*", name):
        if len(word) > per_line and not cut_words:
            return []
        while len(word) > per_line:  # a word longer than a line is cut
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:per_line])
            word = word[per_line:]
        if len(line) + len(word) > per_line:
            lines.append(line)
            line = ""
        line += word
    if line or not lines:
        lines.append(line)
    return [ln.rstrip() or ln for ln in lines]


def _mermaid_id(name: str) -> str:
    return name if name.replace("_", "").isalnum() else "n" + str(abs(hash(name)))


def _labels(edges: list[Any]) -> dict[tuple[str, str], str]:
    """Path-map labels per ``(source, target)``, several joined by `` / ``."""
    out: dict[tuple[str, str], list[str]] = {}
    for e in edges:
        if e.label and e.label not in out.setdefault((e.source, e.target), []):
            out[(e.source, e.target)].append(e.label)
    return {k: " / ".join(v) for k, v in out.items() if v}


class _Layout:
    """Layers, slots for long edges, and positions (``pos``: name or slot -> (x, y))."""

    def __init__(self, g: nx.DiGraph) -> None:
        self.loops = _loop_edges(g)
        forward = nx.DiGraph()
        forward.add_nodes_from(g.nodes)
        forward.add_edges_from(e for e in g.edges if e not in self.loops and e[0] != e[1])
        layer = _longest_path_layers(forward)
        self.depth = max(layer.values(), default=0)
        self._routes: dict[tuple[Any, Any], list[Any]] = {}
        rows: list[list[Any]] = [[] for _ in range(self.depth + 1)]
        for node in nx.topological_sort(forward):
            rows[layer[node]].append(node)
        links: list[tuple[Any, Any]] = []  # between adjacent layers, slots included
        for a, b in forward.edges:
            chain: list[Any] = [a]
            for level in range(layer[a] + 1, layer[b]):
                slot = ("slot", a, b, level)
                rows[level].append(slot)
                chain.append(slot)
            chain.append(b)
            self._routes[(a, b)] = chain
            links.extend(zip(chain, chain[1:], strict=False))
        _order(rows, links)
        self.pos: dict[Any, tuple[float, float]] = {}
        for level, row in enumerate(rows):
            for i, item in enumerate(row):
                self.pos[item] = (i - (len(row) - 1) / 2, -float(level))
        self._trunks = {1.0: 0, -1.0: 0}  # loops already routed beside the layers, per side
        for a, b in sorted(self.loops, key=lambda e: (layer[e[0]] - layer[e[1]], str(e))):
            self._route_loop(a, b, layer, rows)

    def _route_loop(self, a: Any, b: Any, layer: dict[Any, int], rows: list[list[Any]]) -> None:
        """Route a loop edge: one that spans layers runs up beside them, on the side with
        more room, each such loop on a trunk of its own; a node's loop to itself goes out
        to its right and back; one between adjacent layers stays an arc (no route)."""
        if a == b:
            x, y = self.pos[a]
            bends = [("bend", a, b, 0), ("bend", a, b, 1)]
            self.pos[bends[0]] = (x + 0.5, y - 0.14)
            self.pos[bends[1]] = (x + 0.5, y + 0.14)
            self._routes[(a, b)] = [a, *bends, b]
            return
        top, bottom = layer[b] + 1, layer[a] - 1
        if top > bottom:
            return
        xs = [self.pos[item][0] for level in range(top, bottom + 1) for item in rows[level]]
        right, left = max(xs) + 0.7, min(xs) - 0.7
        side = 1.0 if right <= -left else -1.0
        x = (right if side > 0 else left) + side * 0.4 * self._trunks[side]
        self._trunks[side] += 1
        bends = [("bend", a, b, 0), ("bend", a, b, 1)]
        self.pos[bends[0]] = (x, -float(bottom))
        self.pos[bends[1]] = (x, -float(top))
        self._routes[(a, b)] = [a, *bends[: 1 if top == bottom else 2], b]

    def route(self, a: Any, b: Any) -> list[Any]:
        """The points an edge passes: its source, its slots or bends, its target."""
        return self._routes.get((a, b), [a, b])


def _loop_edges(g: nx.DiGraph) -> set[tuple[Any, Any]]:
    """Edges that close a cycle in a depth-first walk from ``START`` (plus self-loops)."""
    loops = {(a, b) for a, b in g.edges if a == b}
    state: dict[Any, int] = {}  # 1: on the walk's path, 2: finished
    order = [START, *(n for n in g.nodes if n != START)]
    for root in order:
        if root in state:
            continue
        stack = [(root, iter(sorted(g.successors(root), key=order.index)))]
        state[root] = 1
        while stack:
            node, succs = stack[-1]
            nxt = next(succs, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                loops.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(sorted(g.successors(nxt), key=order.index))))
    return loops


def _longest_path_layers(forward: nx.DiGraph) -> dict[Any, int]:
    layer: dict[Any, int] = {}
    for node in nx.topological_sort(forward):
        preds = [layer[p] + 1 for p in forward.predecessors(node)]
        layer[node] = max(preds, default=0)
    if END in layer:  # END goes last, below everything
        layer[END] = max(layer.values())
        if any(layer[n] == layer[END] for n in layer if n != END):
            layer[END] += 1
    return layer


def _order(rows: list[list[Any]], links: list[tuple[Any, Any]]) -> None:
    """Reorder each layer in place by the mean position of its neighbours in the layer
    above (downward sweeps) or below (upward sweeps)."""
    ups: dict[Any, list[Any]] = {}
    downs: dict[Any, list[Any]] = {}
    for a, b in links:
        downs.setdefault(a, []).append(b)
        ups.setdefault(b, []).append(a)
    for sweep in range(_SWEEPS):
        down = sweep % 2 == 0
        levels = range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)
        for level in levels:
            ref = rows[level - 1] if down else rows[level + 1]
            index = {item: i for i, item in enumerate(ref)}
            near = ups if down else downs
            keyed = []
            for i, item in enumerate(rows[level]):
                seen = [index[n] for n in near.get(item, ()) if n in index]
                keyed.append((sum(seen) / len(seen) if seen else float(i), i, item))
            rows[level][:] = [item for *_, item in sorted(keyed, key=lambda k: k[:2])]


class _EdgeStyle:
    __slots__ = ("color", "line")

    def __init__(self, conditional: bool) -> None:
        self.line = "--" if conditional else "-"
        self.color = "#777" if conditional else "#222"


def _draw_path(ax: Any, points: list[tuple[float, float]], style: _EdgeStyle) -> None:
    last = len(points) - 2
    for i, (start, end) in enumerate(zip(points, points[1:], strict=False)):
        ax.annotate("", xy=end, xytext=start, arrowprops={
            "arrowstyle": "-|>" if i == last else "-", "color": style.color,
            "linestyle": style.line, "shrinkA": _RADIUS_PT if i == 0 else 0,
            "shrinkB": _RADIUS_PT if i == last else 0, "mutation_scale": 14})


def _draw_loop(ax: Any, start: tuple[float, float], end: tuple[float, float],
               style: _EdgeStyle) -> None:
    """A loop edge between adjacent layers: an arc (``_label_anchor`` finds its top)."""
    ax.annotate("", xy=end, xytext=start, arrowprops={
        "arrowstyle": "-|>", "color": style.color, "linestyle": style.line,
        "connectionstyle": f"arc3,rad={_ARC}", "shrinkA": _RADIUS_PT,
        "shrinkB": _RADIUS_PT, "mutation_scale": 14})


def _label_anchor(layout: _Layout, a: Any, b: Any) -> tuple[float, float]:
    """Where an edge's label goes: on its first segment, on the outer side of a routed
    loop, or at the top of an arc (drawn with ``arc3,rad=_ARC``)."""
    route = layout.route(a, b)
    pos = layout.pos
    if len(route) > 2 and (a, b) in layout.loops:  # the segment beside the layers
        (x1, y1), (x2, y2) = pos[route[1]], pos[route[-2]]
        return (x1 + x2) / 2, (y1 + y2) / 2
    (x1, y1), (x2, y2) = pos[a], pos[route[1]]
    if (a, b) in layout.loops:  # an arc: its apex is half way to the control point
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        return mx + _ARC / 2 * (y2 - y1), my - _ARC / 2 * (x2 - x1)
    return x1 + (x2 - x1) * 0.45, y1 + (y2 - y1) * 0.45


def _draw_label(ax: Any, x: float, y: float, text: str) -> None:
    ax.text(x, y, text, fontsize=7, ha="center", va="center", color="#333",
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.9})
