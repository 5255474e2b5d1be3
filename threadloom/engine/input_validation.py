"""The run's input checked against a pydantic state schema (as LangGraph validates it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from threadloom.engine.schema import ChannelSpec, schema_kind
from threadloom.errors import InputValidationError, InvalidUpdateError


def input_validator(
    schema: Any, specs: Mapping[str, ChannelSpec]
) -> Callable[[list[tuple[str, Any]], set[str]], list[tuple[str, Any]]] | None:
    """For a pydantic state schema, a function validating the run's input writes.

    As LangGraph does for pydantic states, each input value is checked against its
    field's type (a model with validators: the whole input against the model), and a
    required field that neither the input nor the saved state holds is an error. The
    values are kept as given, as LangGraph stores them; a node reads them validated
    (``schema.state_builder``). Other schema kinds get None (no validation).
    """
    if schema_kind(schema) != "pydantic":
        return None
    from pydantic import TypeAdapter, ValidationError

    adapters: dict[str, Any] = {}
    required = [n for n, f in schema.model_fields.items() if f.is_required()]
    hooks = schema.__pydantic_decorators__
    whole = any(getattr(hooks, kind) for kind in (
        "validators", "field_validators", "root_validators", "model_validators"))

    def validate(writes: list[tuple[str, Any]], present: set[str]) -> list[tuple[str, Any]]:
        if whole and _validate_model(schema, specs, writes, required):
            return writes  # the model's validators ran; what they make, nodes read
        out = []
        for key, value in writes:
            spec = specs.get(key)
            if (spec is None or key not in schema.model_fields
                    or getattr(spec.reducer, "__name__", "") == "add_messages"):
                # add_messages coerces its input (tuples, dicts, strings) itself; the
                # merged list is validated when a node reads the state, as in LangGraph
                out.append((key, value))
                continue
            adapter = adapters.get(key)
            if adapter is None:
                adapter = adapters[key] = TypeAdapter(spec.annotation)
            try:  # checked, kept as given (as LangGraph): nodes read the model validated
                adapter.validate_python(value)
                out.append((key, value))
            except ValidationError as exc:
                first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
                raise InputValidationError.from_validation(
                    exc, f"input key {key!r} does not match {schema.__qualname__}: {first} "
                    f"(got {type(value).__name__} {value!r:.60})", key) from exc
        given = present | {k for k, _ in writes}
        missing = [n for n in required if n not in given]
        if missing:
            raise InvalidUpdateError(
                f"input is missing required field(s) {missing} of {schema.__qualname__}",
                field=missing[0],
            )
        return out

    return validate


def _validate_model(schema: Any, specs: Mapping[str, ChannelSpec],
                    writes: list[tuple[str, Any]], required: list[str]) -> bool:
    """Check the input with ``schema.model_validate`` (its field and model validators
    run); False when the input lacks a required field (then checked per field).

    Raises:
        InputValidationError: the model refuses the input.
    """
    from pydantic import ValidationError

    passed = {k for k, _ in writes if k in schema.model_fields
              and getattr(specs[k].reducer, "__name__", "") != "add_messages"}
    if any(n not in passed for n in required):
        return False
    try:
        schema.model_validate({k: v for k, v in writes if k in passed})
    except ValidationError as exc:
        first: dict[str, Any] = dict(exc.errors()[0]) if exc.errors() else {}
        field = str(first["loc"][0]) if first.get("loc") else None
        raise InputValidationError.from_validation(
            exc, f"input does not match {schema.__qualname__}: {first.get('msg', exc)}",
            field) from exc
    return True


__all__ = ["input_validator"]
