"""Extraction on a GPU: short regions' shares add up to about the forward they make up
(foundry.extract.timing's back-to-back timing), not to a multiple of it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_many_short_regions_share_about_the_forward(tmp_path):
    import torch
    import torch.nn as nn

    from foundry.extract.__main__ import SKEWED_SHARE
    from foundry.extract.api import extract

    def block(c_in, c_out, groups):
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, groups=groups, bias=False),
                             nn.BatchNorm2d(c_out), nn.ReLU())

    # a MobileNet-like stack of small depthwise and pointwise layers: each a few microseconds
    layers = [block(3, 32, 1)] + [block(32, 32, 32 if i % 2 else 1) for i in range(12)]
    model = nn.Sequential(*layers).cuda().eval()
    manifest = extract(model, (torch.randn(2, 3, 32, 32, device="cuda"),), tmp_path)
    assert len(manifest.regions) >= 2
    assert manifest.regions_share < SKEWED_SHARE, [(r.task_id, r.time_ms) for r in manifest.regions]
