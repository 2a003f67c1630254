"""The run directory: evaluation log (Parquet parts), island checkpoints, best kernels,
report. Nothing here imports ray."""

from foundry.store.evallog import EvaluationLog, EvaluationRecord, read_evaluations
from foundry.store.rundir import RunDir
from foundry.store.schema import EVAL_SCHEMA

__all__ = ["EVAL_SCHEMA", "EvaluationLog", "EvaluationRecord", "RunDir", "read_evaluations"]
