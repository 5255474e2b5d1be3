"""The five nodes of an agent graph: ``before_run``, ``model``, ``tools``, ``exit_check``,
``after_run``.

```
START -> before_run -> model -> tools -> exit_check -> after_run -> END
                        ^    \\________________^   |
                        |_________________________| (continue)
```

Every node is async and reads the run's options (``RunOptions``) from the engine's task
context, so nothing per-run that cannot be stored (callbacks, request-scoped objects)
enters the checkpoint. Each node routes with ``Command(goto=...)``. Hooks run only where
some are configured; without hooks a node builds no ``State`` at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.agent.agent_state import Control, HookBridge, messages_update
from threadloom.agent.exit import JUMP_END, MAX_STEPS, ExitRules, last_exit
from threadloom.agent.hooks import run_hooks
from threadloom.agent.requests import (
    NO_OPTIONS,
    Prompts,
    RunOptions,
    missing_result,
    repair_tool_pairs,
)
from threadloom.agent.structured import STRUCTURED_EXIT, ProviderStrategy, Strategy
from threadloom.agent.toolstep import ToolStep
from threadloom.agent.modelcall import ModelCaller
from threadloom.engine.runtime import current_task
from threadloom.engine.types import Command
from threadloom.messages import BaseMessage

NODE_NAMES = ("before_run", "model", "tools", "exit_check", "after_run")
_ZERO_USAGE = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
_RESET = {"step_count": None, "token_usage": None, "tool_call_counts": None}
