"""`python -m foundry +exp=kernelbench`: the Hydra entry point (thin; see foundry.run)."""

from __future__ import annotations

import sys

from foundry.bytecode import keep_bytecode

keep_bytecode()  # before hydra and torch (see foundry.bytecode)

import hydra  # noqa: E402
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="pkg://foundry.conf", config_name="config")
def _app(cfg: DictConfig) -> None:
    from foundry.run import main_entry
    code = main_entry(cfg)
    if code:
        sys.exit(code)


def main() -> None:
    _app()


if __name__ == "__main__":
    main()
