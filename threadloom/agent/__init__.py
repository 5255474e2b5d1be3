"""The prebuilt tool-calling agent: ``create_agent`` and what it is made of.

``create_agent`` compiles a model, tools, prompts, hooks and middleware into a graph with
the nodes ``before_run``, ``model``, ``tools``, ``exit_check`` and ``after_run``.
"""

from threadloom.agent.agent_state import AgentState
from threadloom.agent.approval import approval_hook
from threadloom.agent.builder import Agent, create_agent
from threadloom.agent.generator import ChatGeneratorModel
from threadloom.agent.hooks import HOOK_POINTS, hook
from threadloom.agent.requests import ModelRequest, ToolCallRequest
from threadloom.agent.state import State
from threadloom.agent.structured import ProviderStrategy, StructuredOutputError, ToolStrategy

__all__ = [
    "HOOK_POINTS", "Agent", "AgentState", "ChatGeneratorModel", "ModelRequest",
    "ProviderStrategy", "State",
    "StructuredOutputError", "ToolCallRequest", "ToolStrategy", "approval_hook", "create_agent",
    "hook",
]
