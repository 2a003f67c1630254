"""Template-based parameter optimisation: search a candidate's TUNABLE space."""

from foundry.tuning.space import read_tunable
from foundry.tuning.tuner import Tuner, TunerConfig, TuneResult, TuningRecord

__all__ = ["TuneResult", "Tuner", "TunerConfig", "TuningRecord", "read_tunable"]
