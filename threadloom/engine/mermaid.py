"""Mermaid text and JSON of a drawing (``lgdraw.Drawn``), in LangGraph's layout.

The text is what LangGraph's ``draw_mermaid`` writes for the same graph, byte for byte:
an optional front matter and node list (``with_styles``), the edges grouped by the
subgraph they lie in (``subgraph NAME ... end`` blocks, nested), ids made safe for
Mermaid (``:`` is ``\\3a``), labels wrapped every ``wrap_label_n_words`` words, then the
class definitions. ``to_json`` is the ``{"nodes": [...], "edges": [...]}`` shape that
LangGraph's ``Graph.to_json`` returns and its server serves.
"""

from __future__ import annotations

import string
from typing import Any

from threadloom.engine.lgdraw import Drawn, DrawnNode, LgEdge

__all__ = ["mermaid_text", "to_json"]

_SAFE = set(string.ascii_letters + string.digits + "_-")
_MARKDOWN = tuple("*_`")
_STYLES = {"default": "fill:#f2f0ff,line-height:1.2", "first": "fill-opacity:0",
           "last": "fill:#bfb6fc"}


def to_json(drawn: Drawn) -> dict[str, Any]:
    """The drawing as LangGraph's JSON."""
    nodes = []
    for node in drawn.nodes.values():
        item: dict[str, Any] = {"id": node.id}
        if node.kind is not None:
            item["type"] = "runnable"
            item["data"] = {"id": list(node.kind), "name": node.id}
        if node.metadata:
            item["metadata"] = dict(node.metadata)
        nodes.append(item)
    edges = []
    for e in drawn.edges:
        edge: dict[str, Any] = {"source": e.source, "target": e.target}
        if e.data is not None:
            edge["data"] = e.data
        if e.conditional:
            edge["conditional"] = True
        edges.append(edge)
    return {"nodes": nodes, "edges": edges}


def mermaid_text(
    drawn: Drawn,
    *,
    with_styles: bool = True,
    curve_style: Any = "linear",
    node_colors: Any = None,
    wrap_label_n_words: int = 9,
    frontmatter_config: dict[str, Any] | None = None,
) -> str:
    """Mermaid ``graph TD`` text of ``drawn`` (see the module docstring)."""
    lines: list[str] = []
    if with_styles:
        config = dict(frontmatter_config or {})
        inner = dict(config.get("config", {}))
        flow = dict(inner.get("flowchart", {}))
        flow["curve"] = getattr(curve_style, "value", curve_style)
        config["config"] = {**inner, "flowchart": flow}
        lines += ["---", *_yaml(config, 0), "---"]
    lines.append("graph TD;")
    first, last = drawn.first_node(), drawn.last_node()
    if with_styles:
        lines += [_node_line(n, first, last) for n in drawn.nodes.values() if ":" not in n.id]
    groups: dict[str, list[LgEdge]] = {}
    for e in drawn.edges:
        pairs = zip(e.source.split(":"), e.target.split(":"), strict=False)
        groups.setdefault(":".join(a for a, b in pairs if a == b), []).append(e)
    ctx = _Ctx(drawn, groups, lines, with_styles, wrap_label_n_words, first, last)
    ctx.block("")
    for prefix in groups:
        if prefix and ":" not in prefix:
            ctx.block(prefix)
    if with_styles:
        styles = {**_STYLES, **_colors(node_colors)}
        lines += [f"\tclassDef {k} {v}" for k, v in styles.items()]
    return "\n".join(lines) + "\n"


class _Ctx:
    def __init__(self, drawn: Drawn, groups: dict[str, list[LgEdge]], lines: list[str],
                 with_styles: bool, wrap: int, first: str | None, last: str | None) -> None:
        self.drawn, self.groups, self.lines = drawn, groups, lines
        self.with_styles, self.wrap, self.first, self.last = with_styles, wrap, first, last

    def block(self, prefix: str) -> None:
        """One group's edges, in a ``subgraph`` block unless top-level or a self-loop;
        the blocks of the groups one level inside it follow its edges."""
        edges = self.groups.get(prefix, [])
        boxed = bool(prefix) and not (len(edges) == 1 and edges[0].source == edges[0].target)
        if boxed:
            self.lines.append(f"\tsubgraph {prefix.split(':')[-1]}")
            if self.with_styles:
                self.lines += [_node_line(n, self.first, self.last)
                               for n in self.drawn.nodes.values()
                               if n.id.rpartition(":")[0] == prefix]
        for e in edges:
            self.lines.append(f"\t{_safe(e.source)}{self._arrow(e)}{_safe(e.target)};")
        for nested in self.groups:
            if nested.startswith(prefix + ":") and ":" not in nested[len(prefix) + 1:]:
                self.block(nested)
        if boxed:
            self.lines.append("\tend")

    def _arrow(self, e: LgEdge) -> str:
        if e.data is None:
            return " -.-> " if e.conditional else " --> "
        words = str(e.data).split()
        text = str(e.data)
        if len(words) > self.wrap:
            text = "&nbsp<br>&nbsp".join(" ".join(words[i:i + self.wrap])
                                         for i in range(0, len(words), self.wrap))
        return f" -. &nbsp;{text}&nbsp; .-> " if e.conditional else f" -- &nbsp;{text}&nbsp; --> "


def _node_line(node: DrawnNode, first: str | None, last: str | None) -> str:
    name = node.id.split(":")[-1]
    label = f"<p>{name}</p>" if name.startswith(_MARKDOWN) and name.endswith(_MARKDOWN) else name
    if node.metadata:
        label += "<hr/><small><em>" + "\n".join(
            f"{k} = {v}" for k, v in node.metadata.items()) + "</em></small>"
    if node.id == first:
        return f"\t{_safe(node.id)}([{label}]):::first"
    if node.id == last:
        return f"\t{_safe(node.id)}([{label}]):::last"
    return f"\t{_safe(node.id)}({label})"


def _safe(label: str) -> str:
    return "".join(c if c in _SAFE else "\\" + format(ord(c), "x") for c in label)


def _colors(node_colors: Any) -> dict[str, str]:
    if node_colors is None:
        return {}
    if isinstance(node_colors, dict):
        return {str(k): str(v) for k, v in node_colors.items()}
    return {k: getattr(node_colors, k) for k in _STYLES if hasattr(node_colors, k)}


def _yaml(value: dict[str, Any], depth: int) -> list[str]:
    """A nested dict of scalars as block YAML, keys sorted (as ``yaml.dump`` writes)."""
    out: list[str] = []
    for key in sorted(value):
        item = value[key]
        if isinstance(item, dict):
            out.append("  " * depth + f"{key}:")
            out += _yaml(item, depth + 1)
        else:
            out.append("  " * depth + f"{key}: {item}")
    return out
