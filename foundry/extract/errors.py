"""The one error of extraction and deployment: a user's model, its SPEC, a run directory
or a kernel that cannot be used for it. The message names the bad input."""

from __future__ import annotations


class UserModelError(ValueError):
    """A SPEC that names no callable, a model that does not run on its example inputs, a
    run directory made for another model, or a kernel whose shapes no longer match."""
