"""The graph engine: builder, channels, scheduler, entry points."""

from threadloom.engine.channels import Ephemeral
from threadloom.engine.compiled import CompiledGraph
from threadloom.engine.graph import StateGraph
from threadloom.engine.runtime import Runtime, get_config, get_stream_writer, interrupt
from threadloom.engine.snapshot import StateSnapshot
from threadloom.types import END, START, Command, Interrupt, RetryPolicy, Send

__all__ = [
    "END",
    "START",
    "Command",
    "CompiledGraph",
    "Ephemeral",
    "Interrupt",
    "RetryPolicy",
    "Runtime",
    "Send",
    "StateGraph",
    "StateSnapshot",
    "get_config",
    "get_stream_writer",
    "interrupt",
]
