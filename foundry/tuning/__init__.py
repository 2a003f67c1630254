"""Template-based parameter optimisation: search a candidate's TUNABLE space."""

from foundry.tuning.space import read_tunable
from foundry.tuning.tuner import Tuner, TunerConfig, TuneResult, TuningRecord, format_records

__all__ = ["TuneResult", "Tuner", "TunerConfig", "TuningRecord", "format_records", "read_tunable"]
