"""JSON for the page: no NaN or infinity (JSON has neither), and text that is safe inside
an HTML `<script type="application/json">` block."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

_SCRIPT_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                0x2028: "\\u2028", 0x2029: "\\u2029"}


def finite(value: Any) -> Any:
    """`value` with every non-finite float made None and tuples made lists, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Compact JSON of `value` (non-finite floats as null)."""
    return json.dumps(finite(value), separators=(",", ":"), allow_nan=False, default=str)


def script_json(value: Any) -> str:
    """JSON that can sit inside a `<script type="application/json">` element: every `<`,
    `>` and `&` (and the two line separators JavaScript once treated as line ends) is a
    \\u escape, so no text in it (a candidate's `</script>`) can end the element."""
    return dumps(value).translate(_SCRIPT_SAFE)
