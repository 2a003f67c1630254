"""The one fixed Arrow schema of the evaluation log.

One row is one evaluation: the log's own columns (`eval_id`, `seq`, ...), then every
`Candidate` field, then every `EvalResult` field (the two share `candidate_id` and
`task_id`). Dicts and tuples are JSON strings (see `foundry.types`). The schema is
derived once from the record types and checked against them at import, so a field added
to a record cannot silently drop out of the log.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import pyarrow as pa

from foundry.types import Candidate, EvalResult

LOG_FIELDS = (
    pa.field("eval_id", pa.string(), nullable=False),  # unique per evaluation
    pa.field("seq", pa.int64(), nullable=False),  # order in which the run recorded it
    pa.field("session", pa.string()),  # one id per start of the driver (resume = new one)
    pa.field("recorded_at", pa.float64()),  # unix time the driver recorded it
    pa.field("evaluator", pa.string()),  # which evaluator actor produced it
)

_ARROW_BY_ANNOTATION = {
    "str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
    "float | None": pa.float64(), "int | None": pa.int64(), "str | None": pa.string(),
    "dict": pa.string(), "tuple": pa.string(), "list": pa.string(),
}

_PREFIX_CANDIDATE = ""  # candidate fields keep their names
_RESULT_RENAMES: dict[str, str] = {}  # result fields keep their names too (shared ones merge)


def _record_fields(cls) -> list[pa.Field]:
    out = []
    for f in dataclasses.fields(cls):
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if ann not in _ARROW_BY_ANNOTATION:
            raise TypeError(f"{cls.__name__}.{f.name}: no Arrow type for annotation {ann!r}")
        out.append(pa.field(f.name, _ARROW_BY_ANNOTATION[ann]))
    return out


def _build_schema() -> pa.Schema:
    fields: list[pa.Field] = list(LOG_FIELDS)
    names = {f.name for f in fields}
    for cls in (Candidate, EvalResult):
        for f in _record_fields(cls):
            if f.name in names:
                continue
            fields.append(f)
            names.add(f.name)
    return pa.schema(fields)


EVAL_SCHEMA: pa.Schema = _build_schema()
CANDIDATE_COLUMNS = tuple(f.name for f in dataclasses.fields(Candidate))
RESULT_COLUMNS = tuple(f.name for f in dataclasses.fields(EvalResult))


def conform(row: Mapping[str, Any]) -> dict[str, Any]:
    """Return `row` with exactly the schema's columns (missing ones None); reject extras."""
    extra = set(row) - set(EVAL_SCHEMA.names)
    if extra:
        raise ValueError(f"evaluation row has columns not in the log schema: {sorted(extra)}")
    return {name: row.get(name) for name in EVAL_SCHEMA.names}


def to_table(rows: list[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([conform(r) for r in rows], schema=EVAL_SCHEMA)
