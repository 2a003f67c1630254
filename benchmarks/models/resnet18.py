"""torchvision's ResNet-18 with random weights (nothing downloaded), in eval mode, for
extract -> run -> deploy on real convolutions, batch norms and pooling.

    python -m foundry.extract benchmarks.models.resnet18:build --out runs/resnet18_tasks
    python -m foundry tasks.path=runs/resnet18_tasks llm=none budget.wall_time_s=300 \
        hydra.run.dir=runs/resnet18_run
    OMP_NUM_THREADS=1 python -m foundry.deploy benchmarks.models.resnet18:build runs/resnet18_run --check

Needs torchvision (`pip install -e '.[models]'`; see benchmarks.models.packages for a
CUDA-built torchvision next to a CPU torch)."""

import torch

from benchmarks.models.packages import import_torchvision

BATCH = 8
SIZE = 112  # height and width of the images (ImageNet's 224 is 4x the work)


def build(seed: int = 0, batch: int = BATCH, size: int = SIZE, dtype: torch.dtype = torch.float32):
    """(model, example_inputs): a seeded ResNet-18 (1000 classes) and one batch of images."""
    torchvision = import_torchvision()
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(weights=None).eval().to(dtype)
    return model, (torch.randn(batch, 3, size, size, dtype=dtype),)
