"""``format_tool_output``: a tool's return value as the text of its ``ToolMessage``."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic_core import to_jsonable_python


def format_tool_output(value: Any) -> str:
    """Turn a tool's return value into ToolMessage content.

    A ``str`` is kept as is; ``None`` becomes ``""``; anything else is JSON-encoded
    (pydantic models as ``model_dump(mode="json")``, dataclasses, datetimes, UUIDs and
    sets as pydantic encodes them; unknown objects as ``str(obj)``).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    kind = type(value)
    if kind is int:  # what json.dumps writes for these, without the encoder round trip
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
