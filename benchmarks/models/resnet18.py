"""torchvision's ResNet-18 with random weights (nothing downloaded), in eval mode, for
extract -> run -> deploy on real convolutions, batch norms and pooling.

    python -m foundry.extract benchmarks.models.resnet18:build --out runs/resnet18_tasks
    python -m foundry tasks.path=runs/resnet18_tasks llm=none budget.wall_time_s=300 \
        hydra.run.dir=runs/resnet18_run
    OMP_NUM_THREADS=1 python -m foundry.deploy benchmarks.models.resnet18:build runs/resnet18_run --check

On a GPU, `build_cuda` (batch 32 at ImageNet's 224 x 224, on the current CUDA device).

Needs torchvision (`pip install -e '.[models]'`; see benchmarks.models.packages for a
CUDA-built torchvision next to a CPU torch)."""

import torch

from benchmarks.models.packages import import_torchvision

BATCH = 8
SIZE = 112  # height and width of the images (ImageNet's 224 is 4x the work)


def _trained_like_norms(model: torch.nn.Module) -> None:
    """Batch-norm statistics and affine parameters spread as in a trained model (a fresh
    ResNet's are mean 0, variance 1, weight 1, bias 0: a kernel that mishandled any of them
    would still match the model exactly, so deploy's check against the region would pass)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.2)
                m.bias.normal_(0.0, 0.1)


def build(seed: int = 0, batch: int = BATCH, size: int = SIZE, dtype: torch.dtype = torch.float32):
    """(model, example_inputs): a seeded ResNet-18 (1000 classes) and one batch of images."""
    torchvision = import_torchvision()
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(weights=None).eval().to(dtype)
    _trained_like_norms(model)
    return model, (torch.randn(batch, 3, size, size, dtype=dtype),)


CUDA_BATCH = 32
CUDA_SIZE = 224


def build_cuda(seed: int = 0):
    """`build` at batch 32, 224 x 224, on the current CUDA device."""
    model, (images,) = build(seed, batch=CUDA_BATCH, size=CUDA_SIZE)
    return model.cuda(), (images.cuda(),)
