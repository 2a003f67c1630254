"""From a user's model to KernelBench tasks: `extract(model, example_inputs, out=DIR)`
(or `python -m foundry.extract SPEC --out DIR`) captures the forward, splits it into
regions worth a kernel and writes one task file per distinct region plus manifest.json."""

from foundry.extract.api import extract
from foundry.extract.errors import UserModelError
from foundry.extract.manifest import MANIFEST_FILE, Manifest, read_manifest

__all__ = ["extract", "UserModelError", "Manifest", "MANIFEST_FILE", "read_manifest"]
