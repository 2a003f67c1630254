"""Bins are declared once and never move (the 'bins silently rescaled' failure)."""

import json

import pytest

from islands import Axis, Bins, Island, IslandConfig

from island_helpers import make_candidate, make_result


def test_edges_axis_maps_by_declared_edges_and_clamps_only_at_the_ends():
    axis = Axis.binned(name="source_lines", edges=(40, 80, 160))
    assert [axis.index(v) for v in (0, 39.9, 40, 79, 80, 159, 160, 10_000)] == [
        0, 0, 1, 1, 2, 2, 3, 3]


def test_level_axis_rejects_out_of_range_levels_instead_of_clamping():
    axis = Axis.levels(name="memory")
    with pytest.raises(ValueError, match="memory"):
        axis.index(4)
    with pytest.raises(ValueError, match="memory"):
        axis.index(1.5)


def test_bad_edges_are_rejected():
    for edges in ((), (3, 2), (1, float("nan"))):
        with pytest.raises(ValueError, match="edges"):
            Axis.binned(name="x", edges=edges)


def test_extreme_candidates_do_not_rescale_the_grid():
    """A run that sees huge and tiny feature values keeps every cell where it was:
    the same source lands in the same cell before and after them, and the edges are
    the declared ones, also after a checkpoint round trip."""
    cfg = IslandConfig.from_config({"extra_axes": {"source_lines": [30, 60, 120]}})
    island = Island(island_id=0, task_id="t", config=cfg, seed=0)
    probe = make_candidate(task_id="t", corpus="triton_relu_block.py", tag="probe")
    _, probe_cell_before = island.describe(probe)
    small = make_candidate(task_id="t", source="x = 1", backend="triton", tag="s")
    huge = make_candidate(task_id="t", source="y = 2\n" * 5000, backend="triton", tag="h")
    cells = {}
    for cand in (small, huge, probe):
        out = island.add(candidate=cand, result=make_result(cand))
        cells[cand.candidate_id] = out.cell
    assert cells[small.candidate_id][3] == 0
    assert cells[huge.candidate_id][3] == 3
    assert cells[probe.candidate_id] == probe_cell_before
    assert island.bins.axes[3].edges == (30.0, 60.0, 120.0)
    for e in island.archive.elites():  # every elite sits where its own source says
        assert island.describe(e.candidate)[1] == e.cell
    path_state = json.loads(json.dumps(island.state_dict()))
    restored = Island.from_state(path_state)
    assert restored.bins == island.bins
    assert restored.describe(probe)[1] == probe_cell_before


def test_grid_round_trip():
    bins = Bins.default(extra_axes={"kernel_count": [2, 3]})
    assert Bins.from_dict(json.loads(json.dumps(bins.to_dict()))) == bins
    assert bins.num_cells == 64 * 3
    assert len(list(bins.all_cells())) == bins.num_cells
