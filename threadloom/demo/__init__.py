"""The offline demo of ``threadloom demo``: a shop assistant agent over a local SQLite
database, with a safe calculator, currency conversion from a local rate table, a
human-approved ``cancel_order`` tool, and a scripted fallback model.

``build_demo_agent`` needs the agent package; the data, tools, calculator and scripted
brain import without it.
"""

from __future__ import annotations

from threadloom.demo.brain import DEFAULT_QUESTION, demo_brain
from threadloom.demo.calc import CalculatorError, safe_eval
from threadloom.demo.data import DemoData
from threadloom.demo.tools import APPROVAL_TOOLS, make_tools

__all__ = [
    "APPROVAL_TOOLS", "CalculatorError", "DEFAULT_QUESTION", "DemoData", "build_demo_agent",
    "demo_brain", "make_tools", "safe_eval",
]


def __getattr__(name: str) -> object:
    if name == "build_demo_agent":
        from threadloom.demo.agent import build_demo_agent

        return build_demo_agent
    raise AttributeError(f"module 'threadloom.demo' has no attribute {name!r}")
