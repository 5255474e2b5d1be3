"""The demo agent's tools: queries over the shop database, currency conversion from the
local rate table, a safe calculator, and one side-effecting tool (``cancel_order``) that
the approval hook gates."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from threadloom.demo.calc import CalculatorError, safe_eval
from threadloom.demo.data import DemoData, OrderNotFoundError, OrderStateError
from threadloom.errors import ToolError
from threadloom.tools import Tool, tool

__all__ = ["APPROVAL_TOOLS", "make_tools"]

APPROVAL_TOOLS = frozenset({"cancel_order"})
"""Tools with side effects: a human approves each call before it runs."""

Status = Literal["processing", "shipped", "delivered", "cancelled"]


def make_tools(data: DemoData) -> list[Tool]:
    """The demo's tools, bound to one database.

    Args:
        data: the demo database the tools read and write.

    Returns:
        ``[search_products, get_order, list_orders, convert_currency, calculator,
        cancel_order]``. Failures raise ``ToolError`` (the agent hands the message back
        to the model as an error tool result).
    """

    return [*_lookup_tools(data), *_money_tools(data), _cancel_tool(data)]


def _lookup_tools(data: DemoData) -> list[Tool]:
    """``search_products``, ``get_order``, ``list_orders``: they only read."""

    @tool
    def search_products(
        query: Annotated[str, "words to look for in product names or categories"] = "",
        category: Annotated[str | None, "camping, cooking, clothing or bags"] = None,
        max_price: Annotated[float | None, "highest price in USD"] = None,
    ) -> list[dict[str, Any]]:
        """Find products in the shop, cheapest first (prices in USD)."""
        return data.search_products(query, category, max_price)

    @tool
    def get_order(order_id: Annotated[int, "the order number, e.g. 1003"]) -> dict[str, Any]:
        """Look up one order: customer, status, items and total in USD."""
        try:
            return data.get_order(order_id)
        except OrderNotFoundError as exc:
            raise ToolError(str(exc), tool_name="get_order") from exc

    @tool
    def list_orders(
        customer: Annotated[str | None, "part of the customer's name"] = None,
        status: Annotated[Status | None, "only orders with this status"] = None,
    ) -> list[dict[str, Any]]:
        """List orders (newest first) with their totals in USD."""
        return data.list_orders(customer, status)

    return [search_products, get_order, list_orders]


def _money_tools(data: DemoData) -> list[Tool]:
    """``convert_currency`` and ``calculator``."""

    @tool
    def convert_currency(
        amount: Annotated[float, "the amount to convert"],
        from_currency: Annotated[str, "ISO code, e.g. USD"],
        to_currency: Annotated[str, "ISO code, e.g. EUR"],
    ) -> dict[str, Any]:
        """Convert money between currencies with the shop's exchange-rate table."""
        try:
            src, as_of = data.rate(from_currency)
            dst, _ = data.rate(to_currency)
        except KeyError as exc:
            raise ToolError(str(exc.args[0]), tool_name="convert_currency") from exc
        return {
            "amount": amount, "from": from_currency.upper(), "to": to_currency.upper(),
            "converted": round(amount * src / dst, 2), "rate": round(src / dst, 6),
            "rates_as_of": as_of,
        }

    @tool
    def calculator(expression: Annotated[str, "arithmetic, e.g. '(189 + 2*34.95) * 0.15'"]) -> str:
        """Evaluate an arithmetic expression: + - * / // % ** ( ), abs, round, min, max,
        sqrt, and percentages such as '15% of 80'."""
        try:
            return str(safe_eval(expression))
        except CalculatorError as exc:
            raise ToolError(f"calculator: {exc}", tool_name="calculator") from exc

    return [convert_currency, calculator]


def _cancel_tool(data: DemoData) -> Tool:
    """``cancel_order``: the one tool that changes data (the demo asks before it runs)."""

    @tool
    def cancel_order(
        order_id: Annotated[int, "the order number to cancel"],
        reason: Annotated[str, "why the customer cancels"] = "customer request",
    ) -> dict[str, Any]:
        """Cancel an order that is still processing. Needs a human's approval."""
        try:
            order = data.cancel_order(order_id, reason)
        except (OrderNotFoundError, OrderStateError) as exc:
            raise ToolError(str(exc), tool_name="cancel_order") from exc
        return {"cancelled": True, "order_id": order_id, "status": order["status"],
                "refund_usd": order["total"]}

    return cancel_order
