"""A tool's argument schema: signature -> pydantic model -> OpenAI JSON schema.

Parameter descriptions come from ``Annotated[T, "description"]``, ``Field(...)`` or the
function's Google-style docstring (``Args:`` section), as LangChain's ``@tool`` reads them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from threadloom.tools.markers import _injection

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description})."""
    if not doc:
        return "", {}
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1).lstrip("*")
            params[current] = match.group(2).strip()
        elif current:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params


def _field_spec(annotation: Any, default: Any, doc: str | None) -> tuple[Any, Any]:
    """Turn one parameter into a ``create_model`` field spec ``(annotation, default)``."""
    base, metadata = annotation, []
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
    description = doc
    kept: list[Any] = []
    for item in metadata:
        if isinstance(item, str):
            description = item
        else:
            kept.append(item)
    has_desc = any(isinstance(m, FieldInfo) and m.description for m in kept)
    if description and not has_desc:
        kept.append(Field(description=description))
    spec = Annotated[(base, *kept)] if kept else base  # type: ignore[valid-type]
    return spec, (... if default is inspect.Parameter.empty else default)


def _build_args_model(
    name: str, func: Callable[..., Any], param_docs: dict[str, str], given: Any = None
) -> tuple[type[BaseModel], dict[str, Any], dict[str, str]]:
    """Build (args model, {param: injection marker}, {param: model field name}).

    With ``given`` (a user's ``args_schema``) only the injected parameters are taken from
    the signature, and the model is ``given``.
    """
    try:
        hints = get_type_hints(func, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"tool {name!r}: cannot resolve type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    injected: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    for pname, param in inspect.signature(func).parameters.items():
        annotation = hints.get(pname, Any)
        marker = _injection(pname, annotation)
        if marker is not None:
            injected[pname] = marker
        elif param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD) and given is None:
            spec, default = _field_spec(annotation, param.default, param_docs.get(pname))
            fname = pname
            if pname.startswith("_") or hasattr(BaseModel, pname):
                fname = f"field_{len(fields)}_{pname.lstrip('_')}"
                spec = Annotated[spec, Field(alias=pname)]
            fields[fname] = (spec, default)
            field_names[pname] = fname
    if given is not None:
        if not (isinstance(given, type) and issubclass(given, BaseModel)):
            raise TypeError(f"tool {name!r}: args_schema must be a pydantic model class")
        given, hidden = _strip_injected(given)
        injected.update(hidden)
        return given, injected, {(f.alias or n): n for n, f in given.model_fields.items()}
    config = ConfigDict(extra="ignore", protected_namespaces=())
    try:
        model = create_model(f"{name}_args", __config__=config, **fields)
        model.model_json_schema()
    except Exception as exc:  # pydantic raises several types for unsupported annotations
        raise TypeError(f"tool {name!r}: cannot build an argument schema: {exc}") from exc
    return model, injected, field_names


def _strip_injected(given: type[BaseModel]) -> tuple[type[BaseModel], dict[str, Any]]:
    """``given`` without its injected fields (``Annotated[str, InjectedToolCallId]``...),
    and those fields' markers: the model neither sees nor sends them, as in LangChain."""
    hidden: dict[str, Any] = {}
    for fname, info in given.model_fields.items():
        marker = _injection(fname if fname == "config" else "", Annotated[
            (info.annotation, *info.metadata)] if info.metadata else info.annotation)
        if marker is not None:
            hidden[info.alias or fname] = marker
    if not hidden:
        return given, hidden
    kept: dict[str, Any] = {n: (f.annotation, f) for n, f in given.model_fields.items()
            if (f.alias or n) not in hidden}
    return create_model(given.__name__, __config__=given.model_config, **kept), hidden


def _clean_schema(node: Any, defs: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
    """Drop pydantic titles and inline ``$ref``s (recursive models keep one ``$ref`` level)."""
    if isinstance(node, list):
        return [_clean_schema(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.rsplit("/", 1)[-1]
        if key in seen or key not in defs:
            return {"type": "object"}
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**_clean_schema(defs[key], defs, seen | {key}), **_clean_schema(extra, defs, seen)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key in ("default", "enum", "const", "examples"):
            out[key] = value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {p: _clean_schema(s, defs, seen) for p, s in value.items()}
        else:
            out[key] = _clean_schema(value, defs, seen)
    return out
