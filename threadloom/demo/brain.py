"""The scripted fallback "model" of the demo: a rule-based planner over the conversation.

Where no real model can be had, the demo runs ``ScriptedChatModel(demo_brain)``. The
brain reads the last user question and the tool results that followed it, and either asks
for the next tool call or writes the final answer from those results. It is a pure
function of the messages, so a thread resumed in a new process continues correctly, and
every number in its answers comes from a tool (the database, the rate table, the
calculator), not from the script.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DEFAULT_QUESTION", "demo_brain"]

DEFAULT_QUESTION = "What did order 1004 cost in EUR, and what is 15% of that?"

_CURRENCIES = {
    "eur": "EUR", "euro": "EUR", "gbp": "GBP", "pound": "GBP", "jpy": "JPY", "yen": "JPY",
    "chf": "CHF", "franc": "CHF", "cad": "CAD", "aud": "AUD", "sek": "SEK", "inr": "INR",
    "rupee": "INR", "cny": "CNY", "yuan": "CNY", "usd": "USD", "dollar": "USD",
}
_ORDER = re.compile(r"(?:order\s*#?|#)\s*(\d{3,6})\b|\b(1\d{3})\b", re.IGNORECASE)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_ARITH = re.compile(r"(?<![\w.])[\d.]+(?:\s*[-+*/^]\s*\(?\s*[\d.]+\s*\)?)+")
_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*(?:usd|\$|dollars?)|\$\s*(\d+(?:\.\d+)?)", re.I)
_PRODUCT_WORDS = ("tent", "bag", "mat", "lamp", "lantern", "stove", "pot", "boot", "jacket",
                  "pack", "bottle", "product", "camping", "cooking", "clothing")
_HELP = ("I am the threadloom demo shop assistant. I can look up orders (e.g. 'order 1003'), "
         "list a customer's orders, search products ('tents under 200'), convert prices "
         "between currencies with the shop's rate table, do arithmetic ('15% of 80'), and "
         "cancel an order that is still processing (a human approves that first).")


class _Turn:
    """The question of the current turn and the tool results since it."""

    def __init__(self, messages: Sequence[Any]) -> None:
        start = max((i for i, m in enumerate(messages) if m.type == "human"), default=-1)
        self.question = messages[start].text if start >= 0 else ""
        self.q = self.question.lower()
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.results: dict[str, list[tuple[dict[str, Any], Any, bool]]] = {}
        for m in messages[start + 1:]:
            if m.type == "ai":
                calls.update({c["id"]: (c["name"], c["args"]) for c in m.tool_calls})
            elif m.type == "tool" and m.tool_call_id in calls:
                name, args = calls[m.tool_call_id]
                ok = m.status != "error"
                self.results.setdefault(name, []).append((args, _parse(m.text), ok))

    def last(self, name: str) -> tuple[dict[str, Any], Any, bool] | None:
        got = self.results.get(name)
        return got[-1] if got else None

    def ok(self, name: str) -> Any:
        got = self.last(name)
        return got[1] if got and got[2] else None


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _currency(q: str) -> str | None:
    words = re.findall(r"[a-z]+", q)
    found = [_CURRENCIES[w.rstrip("s")] for w in words if w.rstrip("s") in _CURRENCIES]
    targets = [c for c in found if c != "USD"]
    return targets[-1] if targets else None


def _order_id(q: str) -> int | None:
    m = _ORDER.search(q)
    return int(m.group(1) or m.group(2)) if m else None


def _base_amount(t: _Turn) -> float | None:
    """The amount the question is about: converted total > order total > product > given."""
    conv = t.ok("convert_currency")
    if isinstance(conv, dict):
        return float(conv["converted"])
    order = t.ok("get_order")
    if isinstance(order, dict):
        return float(order["total"])
    products = t.ok("search_products")
    if isinstance(products, list) and products:
        return float(products[0]["price"])
    m = _AMOUNT.search(t.q)
    return float(m.group(1) or m.group(2)) if m else None


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"content": "", "tool_calls": [
        {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}]}


def _step_cancel(t: _Turn) -> dict[str, Any] | None:
    oid = _order_id(t.q)
    if "cancel" in t.q and oid is not None and t.last("cancel_order") is None:
        return _call("cancel_order", order_id=oid, reason="customer asked in the demo chat")
    return None


def _step_order(t: _Turn) -> dict[str, Any] | None:
    oid = _order_id(t.q)
    if oid is not None and "cancel" not in t.q and t.last("get_order") is None:
        return _call("get_order", order_id=oid)
    return None


def _step_orders(t: _Turn) -> dict[str, Any] | None:
    if "orders" not in t.q or t.last("list_orders") is not None:
        return None
    status = next((s for s in ("processing", "shipped", "delivered", "cancelled") if s in t.q),
                  None)
    m = re.search(r"(?:for|of|by)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)", t.question)
    return _call("list_orders", customer=m.group(1) if m else None, status=status)


def _step_products(t: _Turn) -> dict[str, Any] | None:
    if _order_id(t.q) is not None or t.last("search_products") is not None:
        return None
    word = next((w for w in _PRODUCT_WORDS if w in t.q), None)
    if word is None:
        return None
    m = re.search(r"(?:under|below|less than|max(?:imum)?)\s*\$?\s*(\d+(?:\.\d+)?)", t.q)
    query = "" if word in ("product", "camping", "cooking", "clothing") else word
    category = word if word in ("camping", "cooking", "clothing") else None
    return _call("search_products", query=query, category=category,
                 max_price=float(m.group(1)) if m else None)


def _step_convert(t: _Turn) -> dict[str, Any] | None:
    target = _currency(t.q)
    if target is None or t.last("convert_currency") is not None:
        return None
    amount = _base_amount(t)
    return None if amount is None else _call(
        "convert_currency", amount=amount, from_currency="USD", to_currency=target)


def _step_calc(t: _Turn) -> dict[str, Any] | None:
    if t.last("calculator") is not None:
        return None
    m = _ARITH.search(t.question)
    if m and any(op in m.group(0) for op in "+-*/^"):
        return _call("calculator", expression=m.group(0).strip())
    pct = _PERCENT.search(t.q)
    amount = _base_amount(t)
    if pct and amount is not None:
        return _call("calculator", expression=f"{pct.group(1)}% of {amount}")
    return None


_STEPS: tuple[Callable[[_Turn], dict[str, Any] | None], ...] = (
    _step_cancel, _step_order, _step_orders, _step_products, _step_convert, _step_calc)


def _answer(t: _Turn) -> str:
    parts: list[str] = []
    for name, results in t.results.items():
        for args, value, ok in results:
            parts.append(_describe(name, args, value) if ok else
                         f"The {name.replace('_', ' ')} step did not work: {value}")
    return " ".join(parts) if parts else _HELP


def _describe(name: str, args: dict[str, Any], value: Any) -> str:
    if name == "get_order" and isinstance(value, dict):
        items = ", ".join(f"{i['qty']} x {i['name']}" for i in value["items"])
        return (f"Order {value['id']} for {value['customer']} is {value['status']}: {items}; "
                f"total {value['total']:.2f} USD.")
    if name == "list_orders" and isinstance(value, list):
        rows = "; ".join(f"#{o['id']} {o['customer']} {o['status']} {o['total']:.2f} USD"
                         for o in value)
        return f"Found {len(value)} order(s): {rows}." if value else "No orders match."
    if name == "search_products" and isinstance(value, list):
        rows = "; ".join(f"{p['name']} ({p['sku']}) {p['price']:.2f} USD" for p in value)
        return f"Matching products, cheapest first: {rows}." if value else "No product matches."
    if name == "convert_currency" and isinstance(value, dict):
        return (f"{value['amount']:.2f} {value['from']} is {value['converted']:.2f} "
                f"{value['to']} (rate {value['rate']}, as of {value['rates_as_of']}).")
    if name == "calculator":
        return f"{args.get('expression')} = {value}."
    if name == "cancel_order" and isinstance(value, dict):
        return (f"Order {value['order_id']} is now {value['status']}; "
                f"{value['refund_usd']:.2f} USD will be refunded.")
    return f"{name}: {value}"


def demo_brain(messages: Sequence[Any], tools: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    """Decide the next reply of the scripted demo model.

    Args:
        messages: the conversation so far (threadloom messages).
        tools: the tools offered (OpenAI dicts); a tool not offered is never called.

    Returns:
        A ``ScriptedChatModel`` reply: ``{"content": "", "tool_calls": [...]}`` for the
        next tool call, or ``{"content": answer}`` once nothing is left to look up.
    """
    offered = {t["function"]["name"] for t in tools or ()} if tools is not None else None
    turn = _Turn(messages)
    for step in _STEPS:
        reply = step(turn)
        if reply is not None and (offered is None or
                                  reply["tool_calls"][0]["name"] in offered):
            return reply
    return {"content": _answer(turn)}
