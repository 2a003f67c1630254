"""Which of its open tasks an island steps next: breadth first, then where the headroom is.

A task without a correct kernel on the island comes first, for its first
`FIRST_KERNEL_STEPS` steps: a run gives every task its first correct kernel (its compiler
seed, its first applicable template, each judged once at its own settings) before any task
is tuned or searched deeply. Among those, a task whose compiler seed is expected (asked for,
and not known to have failed) waits behind the ones with none (a lone convolution has none:
Inductor leaves it to the library), since its seed may cover it; it still goes before the
covered tasks. A task loses that place once a step of it added nothing (the
proposer failed or had nothing new, the judge refused it): it is then served like the rest,
so it cannot take turn after turn. After that a task's steps count in proportion to how close its
best kernel is to the task's roofline floor (the fraction GPU results carry in
`metrics["roofline"]`): a task at 0.5 of its floor is served twice as often as one with no
position known, one at the floor a tenth as often. A compute-bound float32 task's floor is
the fp32 matmul rate with TF32 off (what cuBLAS and cuDNN reach in float32), which the
templates' tensor-core float32 products (three TF32 passes, within float32's tolerance)
beat: its fraction is read as `F32_COMPUTE_REACH` times lower (`floor_fraction`), so a
GEMM task whose compiler seed runs at cuBLAS's rate is not taken for a task with nothing
left to gain. Ties go to the earlier task in the order given (the island's round-robin,
which starts at another task on each island).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

FIRST_KERNEL_STEPS = 4  # steps a task without a correct kernel goes before the covered ones
MIN_HEADROOM = 0.1  # a task at or above its floor still gets a tenth of the attention
# how far below the fp32 (TF32 off) floor a float32 product on the tensor cores went: the
# matmul template at 1.47x of it on level2/9 and 29 (an H100, KernelBench sizes)
F32_COMPUTE_REACH = 1.5


def floor_fraction(roofline: Mapping | None) -> float | None:
    """The fraction of its floor a result's kernel reached, from its `metrics["roofline"]`,
    as the order reads it (a compute-bound float32 task's divided by F32_COMPUTE_REACH);
    None where it carries none."""
    if not isinstance(roofline, Mapping):
        return None
    fraction = roofline.get("fraction")
    if type(fraction) not in (int, float):
        return None
    if roofline.get("bound") == "compute" and roofline.get("half") is False:
        return float(fraction) / F32_COMPUTE_REACH
    return float(fraction)


@dataclass(frozen=True)
class TaskStanding:
    """What the choice reads of one task on one island: its steps so far (evaluations,
    fruitless steps and steps under way), whether a correct kernel is held, the best
    kernel's fraction of the roofline floor (None where not measured, e.g. on a CPU),
    whether a step of it added nothing and whether its compiler seed is expected."""

    served: int
    covered: bool
    floor_fraction: float | None = None  # as `floor_fraction` reads it
    stalled: bool = False  # some step of it added nothing
    seed_expected: bool = False  # its compiler seed was asked for and is not known to have failed

    @property
    def headroom(self) -> float:
        """1 - the fraction of the floor reached, within [MIN_HEADROOM, 1]; 1 where unknown."""
        if self.floor_fraction is None:
            return 1.0
        return min(1.0, max(MIN_HEADROOM, 1.0 - float(self.floor_fraction)))

    def priority(self) -> tuple[int, float]:
        """Lower goes first: (0, steps) for a task still after its first kernel with no
        compiler seed expected, (1, steps) for one whose seed is expected, else (2, steps
        weighed by the headroom left)."""
        if not self.covered and not self.stalled and self.served < FIRST_KERNEL_STEPS:
            return (1 if self.seed_expected else 0, float(self.served))
        return (2, self.served / self.headroom)


def next_task(order: Sequence[str], standings: Mapping[str, TaskStanding]) -> str | None:
    """The task of `order` to step next (None when `order` is empty)."""
    if not order:
        return None
    return min(order, key=lambda task_id: standings[task_id].priority())
