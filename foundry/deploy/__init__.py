"""From a run back into the user's model: `deploy(model, run_dir)` (or
`python -m foundry.deploy SPEC RUN_DIR --check`) swaps the run's best kernels in as
custom ops, with the original code as the fallback for shapes the search did not see."""

from foundry.deploy.api import DeployInfo, deploy, deployed_info
from foundry.extract.errors import UserModelError

__all__ = ["deploy", "deployed_info", "DeployInfo", "UserModelError"]
