"""The agent's prompt templates: ``system_prompt`` / ``user_prompt`` and their variables
(Haystack's ``Agent`` prompts: Jinja2 text, ``required_variables``)."""

from __future__ import annotations

import logging
import re
from typing import Any

from jinja2 import TemplateSyntaxError

from threadloom.agent.prompt_budget import budget_kwargs, explained
from threadloom.messages import BaseMessage
from threadloom.prompts import ChatPromptTemplate, PromptTemplateError

_LOG = logging.getLogger("threadloom.agent")
# a {% message role="..." %} block with a literal role (a computed role is checked when
# the prompt is rendered)
_BLOCK_ROLE = re.compile(r"""{%-?\s*message\s+role\s*=\s*["']([^"']*)["']""")


class PromptSyntaxError(PromptTemplateError, TemplateSyntaxError):
    """A ``system_prompt`` / ``user_prompt`` that is no valid Jinja2: a
    ``PromptTemplateError`` (a ``ValueError``) and Jinja2's ``TemplateSyntaxError``, which
    Haystack's ``Agent`` raises."""

    def __init__(self, message: str, lineno: int, name: str | None = None,
                 filename: str | None = None) -> None:
        TemplateSyntaxError.__init__(self, message, lineno, name, filename)


class Prompts:
    """The agent's ``system_prompt`` / ``user_prompt`` templates and their variables.

    Args:
        system_prompt: Jinja2 text (or None); rendered per request, never stored.
        user_prompt: Jinja2 text (or None); rendered once per run, appended after the
            messages passed in.
        required_variables: ``"*"``, None or a list of names (each must be a variable of
            one of the templates).

    Raises:
        ValueError: a required name used by neither template (when neither has any
            variable, a warning is logged instead, as Haystack does).
        PromptTemplateError / SecurityError: a template that is invalid or unsafe.
    """

    def __init__(self, system_prompt: Any, user_prompt: Any, required_variables: Any,
                 render_budget: Any = None) -> None:
        system_text = getattr(system_prompt, "text", system_prompt)
        user_text = getattr(user_prompt, "text", user_prompt)
        budget = budget_kwargs(render_budget)
        self.system = _template(system_text, "system", required_variables, budget)
        self.user = _template(user_text, "user", required_variables, budget)
        names = [t.variables for t in (self.system, self.user) if t is not None]
        self.variables: frozenset[str] = frozenset().union(*names)
        if isinstance(required_variables, list | tuple | set | frozenset):
            unknown = sorted(set(required_variables) - self.variables)
            if unknown and not self.variables:  # as Haystack: a warning, not an error
                _LOG.warning("The parameter required_variables is provided but neither "
                             "user_prompt nor system_prompt has template variables; "
                             "required_variables %s is ignored", unknown)
            elif unknown:
                raise ValueError(f"required_variables {unknown} are not variables of "
                                 f"system_prompt/user_prompt: {sorted(self.variables)}")
        self.static_system = (self.system.render().strip() or None) if (
            self.system is not None and not self.system.variables) else None
        self._cache: dict[Any, str | None] = {}

    def sources(self) -> dict[str, str]:
        """``{variable: "system_prompt" | "user_prompt" | "system_prompt and user_prompt"}``,
        sorted by variable."""
        found: dict[str, list[str]] = {}
        for label, template in (("system_prompt", self.system), ("user_prompt", self.user)):
            for name in template.variables if template is not None else ():
                found.setdefault(name, []).append(label)
        return {name: " and ".join(found[name]) for name in sorted(found)}

    def values(self, state: Any) -> dict[str, Any]:
        """The template variables present in ``state``."""
        return {name: state[name] for name in self.variables if name in state}

    def system_text(self, values: dict[str, Any]) -> str | None:
        """The rendered system prompt (cached per variable values), or None."""
        if self.system is None:
            return None
        if not self.system.variables:
            return self.static_system
        try:
            key: Any = tuple(sorted(values.items()))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        with explained():
            text = self.system.render(**values).strip() or None
        if key is not None:
            if len(self._cache) > 128:
                self._cache.clear()
            self._cache[key] = text
        return text

    def user_messages(self, values: dict[str, Any]) -> list[BaseMessage]:
        """The rendered user prompt's messages (empty without a user prompt).

        Raises:
            ValueError: a block whose role was computed renders a non-user message.
        """
        with explained():
            messages = self.user.render_messages(**values) if self.user is not None else []
        for message in messages:
            if message.type != "human":
                raise ValueError(f"user_prompt must render to a user message. Got a message "
                                 f"with role {message.type!r}.")
        return messages


def _template(text: Any, role: str, required: Any,
              budget: dict[str, Any]) -> ChatPromptTemplate | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"{role}_prompt must be a str, got {type(text).__name__}")
    for found in _BLOCK_ROLE.findall(text):
        if found != role:
            raise ValueError(f"{role}_prompt message block must have role {role!r}, found "
                             f"role {found!r}.")
    try:
        template = ChatPromptTemplate(text, default_role=role)
    except PromptTemplateError as exc:
        if isinstance(exc.__cause__, TemplateSyntaxError):
            cause = exc.__cause__
            raise PromptSyntaxError(str(exc), cause.lineno, cause.name, cause.filename) from cause
        raise
    if required == "*" or required is None:
        chosen = required
    else:
        chosen = [n for n in required if n in template.variables]
    return ChatPromptTemplate(text, required_variables=chosen, default_role=role, **budget)


__all__ = ["PromptSyntaxError", "Prompts"]
