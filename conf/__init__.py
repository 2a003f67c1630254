"""Hydra configs (the top-level conf/ folder, installed as the package foundry.conf)."""
