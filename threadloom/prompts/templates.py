"""Sandboxed Jinja2 chat templates (the agent's ``system_prompt`` / ``user_prompt``).

As Haystack's ``ChatPromptBuilder``: a template is Jinja2 text whose undeclared variables
are its inputs, and ``{% message role="user" %}...{% endmessage %}`` blocks build chat
messages. Unlike it, every template is rendered in a sandbox (see
``threadloom.prompts.sandbox``): reaching Python internals raises ``SecurityError``, and a
render budget stops runaway loops. Example::

    t = ChatPromptTemplate(
        '{% message role="system" %}You answer in {{ lang }}.{% endmessage %}'
        '{% message role="user" %}{{ question }}{% endmessage %}',
        required_variables="*",
    )
    t.variables                                  # frozenset({"lang", "question"})
    t.render_messages(lang="French", question="Why?")   # [SystemMessage, HumanMessage]
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from jinja2 import ChainableUndefined, TemplateError, UndefinedError, meta, nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import SecurityError as JinjaSecurityError

from threadloom.errors import SecurityError
from threadloom.prompts.loader import FileTemplateLoader
from threadloom.prompts.plain import plain_variables
from threadloom.prompts.sandbox import (
    MissingVariablesError,
    PromptTemplateError,
    RenderBudget,
    RenderBudgetError,
    SandboxEnvironment,
    activate,
    active_budget,
    add_budget_guards,
    check_template_ast,
    deactivate,
)

if TYPE_CHECKING:
    from threadloom.messages import BaseMessage

MESSAGE_ROLES = ("system", "user", "assistant")
"""Roles a ``{% message %}`` block (and ``default_role``) may take."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class MessageExtension(Extension):
    """The ``{% message role="..." %}...{% endmessage %}`` tag.

    The block's rendered body becomes one message of that role (``system``, ``user`` or
    ``assistant``). Blocks cannot nest.
    """

    tags = {"message"}

    def parse(self, parser: Parser) -> nodes.Node:
        """Parse ``role=<expr>`` and the body up to ``{% endmessage %}``."""
        lineno = next(parser.stream).lineno
        role: nodes.Expr | None = None
        while parser.stream.current.type != "block_end":
            key = parser.stream.expect("name")
            parser.stream.expect("assign")
            if key.value != "role" or role is not None:
                parser.fail(f"{{% message %}} takes one argument, role=; got {key.value!r}",
                            key.lineno)
            role = parser.parse_expression()
            parser.stream.skip_if("comma")
        if role is None:
            parser.fail('{% message %} needs role="system" | "user" | "assistant"', lineno)
        if isinstance(role, nodes.Const) and role.value not in MESSAGE_ROLES:
            parser.fail(f"unknown message role {role.value!r}; use one of {MESSAGE_ROLES}",
                        lineno)
        body = parser.parse_statements(("name:endmessage",), drop_needle=True)
        call = self.call_method("_message", [role], lineno=lineno)
        return nodes.CallBlock(call, [], [], body, lineno=lineno)

    def _message(self, role: Any, caller: Any) -> str:
        budget = active_budget()
        content = caller()
        if role not in MESSAGE_ROLES:
            raise PromptTemplateError(
                f"unknown message role {role!r}; use one of {MESSAGE_ROLES}")
        if budget.nonce in content:
            raise PromptTemplateError("{% message %} blocks cannot be nested")
        budget.charge(len(content), "a {% message %} block")
        budget.blocks.append((role, content))
        return _marker(budget.nonce, len(budget.blocks) - 1)


def _marker(nonce: str, index: int) -> str:
    return f"\x00tl-message-{nonce}-{index}\x00"


def _marker_pattern(nonce: str) -> re.Pattern[str]:
    return re.compile(f"\x00tl-message-{nonce}-(\\d+)\x00")


_ENV = SandboxEnvironment(extensions=[MessageExtension])


def _valid_name(name: Any) -> bool:
    return isinstance(name, str) and bool(_NAME.match(name)) and not name.startswith("__")


def _check_names(names: Iterable[Any], what: str) -> None:
    bad = sorted(repr(n) for n in names if not _valid_name(n))
    if bad:
        raise PromptTemplateError(
            f"invalid {what} name(s): {', '.join(bad)} (ASCII identifiers, not starting "
            "with '__')")


def template_variables(ast: nodes.Template) -> frozenset[str]:
    """The real inputs of a parsed template.

    ``jinja2.meta.find_undeclared_variables`` also reports names set with ``{% set %}``
    inside ``{% if %}`` branches when used in a loop (pallets/jinja#1849); those are
    dropped here, as are loop variables and globals. A name set only inside a loop
    body and read after it is therefore not an input (it renders as an error).
    """
    assigned = {
        name.name
        for node in ast.find_all((nodes.Assign, nodes.AssignBlock))
        if isinstance(node, (nodes.Assign, nodes.AssignBlock))  # narrows the joined type
        for name in (node.target, *node.target.find_all(nodes.Name))
        if isinstance(name, nodes.Name)
    }
    return frozenset(meta.find_undeclared_variables(ast) - assigned - set(_ENV.globals))


class ChatPromptTemplate:
    """A Jinja2 chat template rendered in a sandbox with a render budget.

    Args:
        template: the Jinja2 source. ``{% include %}``, ``{% import %}`` and
            ``{% extends %}`` are refused.
        required_variables: ``"*"`` (every variable required), ``None`` (all optional) or
            a list of names that must be template variables. A missing required variable
            raises ``MissingVariablesError`` listing exactly the missing names, before any
            rendering. A missing optional variable renders as an empty string, iterates
            as empty, has length 0 and tests false with ``is defined`` (documented lenient
            behaviour, as Haystack's builders); everything else stays strict
            (``StrictUndefined``: an undefined attribute of a given value raises).
        default_role: role of text outside ``{% message %}`` blocks: ``"system"`` for a
            system prompt, ``"user"`` (default) for a user prompt.
        render_budget_s: wall-clock seconds one render may take.
        max_output_chars: largest rendered output (and largest string/list built while
            rendering), in characters/items.
        max_steps: loop iterations plus calls one render may make; ``range()`` longer than
            this is refused at once.

    Raises:
        SecurityError: the template names Python internals (``__class__``, ``self``,
            ``cycler``...); see ``threadloom.prompts.sandbox``.
        PromptTemplateError: syntax errors, bad arguments, unknown required names.
    """

    def __init__(
        self,
        template: str,
        *,
        required_variables: Literal["*"] | Sequence[str] | None = None,
        default_role: str = "user",
        render_budget_s: float = 1.0,
        max_output_chars: int = 1_000_000,
        max_steps: int = 100_000,
    ) -> None:
        if not isinstance(template, str):
            raise PromptTemplateError(f"template must be a str, got {type(template).__name__}")
        if default_role not in MESSAGE_ROLES:
            raise PromptTemplateError(
                f"default_role must be one of {MESSAGE_ROLES}, got {default_role!r}")
        if render_budget_s <= 0 or max_output_chars <= 0 or max_steps <= 0:
            raise PromptTemplateError("render budgets must be positive")
        try:
            ast = _ENV.parse(template)
        except TemplateError as exc:
            raise PromptTemplateError(f"template syntax error: {exc}") from exc
        check_template_ast(ast)
        self._source = template
        self._variables = template_variables(ast)
        self._required = self._resolve_required(required_variables)
        self._default_role = default_role
        self._budget_s = float(render_budget_s)
        self._max_chars = int(max_output_chars)
        self._max_steps = int(max_steps)
        self._template = _ENV.from_string(add_budget_guards(ast))

    def _resolve_required(self, required: Literal["*"] | Sequence[str] | None) -> frozenset[str]:
        if required is None:
            return frozenset()
        if required == "*":
            return self._variables
        if isinstance(required, str) or not isinstance(required, Sequence | frozenset | set):
            raise PromptTemplateError(
                f'required_variables must be "*", None or a list of names, got {required!r}')
        _check_names(required, "required variable")
        unknown = sorted(set(required) - self._variables)
        if unknown:
            raise PromptTemplateError(
                f"required variable(s) not used by the template: {', '.join(unknown)}; "
                f"its variables are: {', '.join(sorted(self._variables)) or '(none)'}")
        return frozenset(required)

    @property
    def template(self) -> str:
        """The template source."""
        return self._source

    @property
    def variables(self) -> frozenset[str]:
        """The template's inputs (not ``{% set %}`` names, loop variables or globals)."""
        return self._variables

    @property
    def required_variables(self) -> frozenset[str]:
        """The variables ``render`` refuses to go without."""
        return self._required

    @property
    def default_role(self) -> str:
        """Role of text outside ``{% message %}`` blocks."""
        return self._default_role

    def __repr__(self) -> str:
        return (f"ChatPromptTemplate(variables={sorted(self._variables)}, "
                f"required={sorted(self._required)}, default_role={self._default_role!r})")

    def render(self, /, **variables: Any) -> str:
        """Render to text; ``{% message %}`` blocks contribute their bodies inline.

        Args:
            **variables: template inputs; names must be identifiers. Names the template
                does not use are ignored. Values are converted to plain data first
                (``threadloom.prompts.plain``): messages and pydantic models are seen as
                their fields, and anything that is not data is refused.

        Returns:
            The rendered text, exactly (no stripping).

        Raises:
            MissingVariablesError: required variables missing (nothing is rendered).
            PromptTemplateError: an invalid variable name, or an undefined attribute.
            SecurityError: a variable is not plain data (naming it), or the template
                reached for Python internals or called what it may not.
            RenderBudgetError: the render ran past its budget (a ``SecurityError``).
        """
        text, budget = self._render_raw(variables)
        return _marker_pattern(budget.nonce).sub(lambda m: budget.blocks[int(m[1])][1], text)

    def render_messages(self, /, **variables: Any) -> list[BaseMessage]:
        """Render to chat messages, in template order.

        Each ``{% message role=... %}`` block is one message; each stretch of text outside
        blocks is one message of ``default_role``. Contents are stripped of surrounding
        whitespace and blank messages are dropped. Roles map to ``SystemMessage``,
        ``HumanMessage`` (user) and ``AIMessage`` (assistant).

        Args:
            **variables: as ``render``.

        Returns:
            A list of ``threadloom.messages`` messages.

        Raises:
            The same errors as ``render``.
        """
        from threadloom.messages import AIMessage, HumanMessage, SystemMessage

        classes = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        text, budget = self._render_raw(variables)
        pieces = _marker_pattern(budget.nonce).split(text)
        messages: list[BaseMessage] = []
        for position, piece in enumerate(pieces):
            role, content = budget.blocks[int(piece)] if position % 2 else (
                self._default_role, piece)
            content = content.strip()
            if content:
                messages.append(classes[role](content))
        return messages

    def _render_raw(self, variables: Mapping[str, Any]) -> tuple[str, RenderBudget]:
        _check_names(self._variables, "template variable")
        _check_names(self._required, "required variable")
        _check_names(variables, "variable")
        missing = self._required - variables.keys()
        if missing:
            raise MissingVariablesError(missing)
        given = plain_variables({n: variables[n] for n in self._variables if n in variables})
        context = {name: given[name] if name in given else ChainableUndefined(name=name)
                   for name in self._variables}
        budget = RenderBudget(time_s=self._budget_s, max_steps=self._max_steps,
                              max_chars=self._max_chars, nonce=secrets.token_hex(16))
        token = activate(budget)
        # ``generate`` is typed as an Iterator but returns a generator, which has ``close``.
        chunks = cast(Generator[str, None, None], self._template.generate(context))
        parts: list[str] = []
        try:
            for chunk in chunks:
                budget.add_output(len(chunk))
                parts.append(chunk)
        except JinjaSecurityError as exc:
            raise SecurityError(f"template refused: {exc}") from None
        except UndefinedError as exc:
            raise PromptTemplateError(f"template render error: {exc}") from exc
        except RecursionError:
            raise RenderBudgetError("template recursion too deep", limit="steps") from None
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
            if isinstance(exc, PromptTemplateError):
                raise
            raise PromptTemplateError(
                f"template render error{_template_line(exc)}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            chunks.close()
            deactivate(token)
        return "".join(parts), budget


def _template_line(exc: BaseException) -> str:
    """`` at line N`` of the template frame where ``exc`` was raised ('' if none is found).

    Jinja2 rewrites a render's traceback so that template frames carry the template's own
    line numbers (their globals hold ``__jinja_exception__``); the innermost such frame is
    the failing expression.
    """
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if "__jinja_exception__" in tb.tb_frame.f_globals:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at line {line}" if line is not None else ""


def merge_system_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Join every system message, in order, into one system message at index 0.

    For chat templates (Qwen, Llama, Gemma on vLLM / LM Studio / MLX) that reject a
    system message anywhere but first (case H24). Texts are joined with a blank line;
    the merged message keeps the first system message's id and fields. Other messages
    keep their order. A list with no system message, or with one already first, is
    returned as a new list of the same messages.

    Args:
        messages: ``threadloom.messages`` messages.

    Returns:
        A new list.
    """
    systems = [m for m in messages if m.type == "system"]
    if not systems or (len(systems) == 1 and messages[0] is systems[0]):
        return list(messages)
    text = "\n\n".join(m.text for m in systems if m.text)
    merged = systems[0].model_copy(update={"content": text})
    return [merged, *(m for m in messages if m.type != "system")]


__all__ = [
    "MESSAGE_ROLES",
    "ChatPromptTemplate",
    "FileTemplateLoader",
    "MessageExtension",
    "MissingVariablesError",
    "PromptTemplateError",
    "RenderBudgetError",
    "merge_system_messages",
    "template_variables",
]
