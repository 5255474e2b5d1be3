"""Sandboxed Jinja2 chat templates: the agent's ``system_prompt`` / ``user_prompt``.

- ``templates``: ``ChatPromptTemplate`` (as Haystack's ``ChatPromptBuilder``: the
  template's undeclared variables are its inputs, ``{% message role=... %}`` blocks build
  chat messages) and ``merge_system_messages``;
- ``plain``: variables converted to plain data before a render, and the allow-list of
  what a template may call;
- ``sandbox``: the locked-down Jinja2 environment and the static template check;
- ``filters``: the budget guards around every filter, loop and ``~``;
- ``budget``: the render budget (steps, time, output, memory) and the prompt error
  classes;
- ``loader``: ``FileTemplateLoader``, templates read from files under one root directory.
"""

from threadloom.prompts.loader import FileTemplateLoader
from threadloom.prompts.sandbox import (
    MissingVariablesError,
    PromptTemplateError,
    RenderBudget,
    RenderBudgetError,
)
from threadloom.prompts.templates import (
    MESSAGE_ROLES,
    ChatPromptTemplate,
    merge_system_messages,
    template_variables,
)

__all__ = [
    "MESSAGE_ROLES",
    "ChatPromptTemplate",
    "FileTemplateLoader",
    "MissingVariablesError",
    "PromptTemplateError",
    "RenderBudget",
    "RenderBudgetError",
    "merge_system_messages",
    "template_variables",
]
