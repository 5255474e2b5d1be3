"""Reusable graph nodes: ``ToolNode`` and the ``tools_condition`` router."""

from threadloom.nodes.tool_node import ToolNode, idempotency_key, tools_condition

__all__ = ["ToolNode", "idempotency_key", "tools_condition"]
