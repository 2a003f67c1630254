"""The project's suite loads; KernelBench checkouts, user folders and single files load;
bad paths, levels and ids fail with messages that name them."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry.config_keys import ConfigError
from foundry.tasks.loader import TaskError, build_module
from foundry.tasks.suite import SuiteConfig, default_suite_path, load_suite, resolve_profile

TASK = '''import torch
import torch.nn as nn

N = {n}
SMALL_SIZES = {{"N": 8}}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {n}


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
'''


def _write(folder: Path, name: str, n: int = 64, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(TASK.format(n=n) + extra)
    return path


def test_project_suite_has_enough_tasks_per_level():
    tasks = load_suite(profile="small")
    counts = {lv: sum(t.level == lv for t in tasks) for lv in (1, 2, 3)}
    assert counts[1] >= 30 and counts[2] >= 30 and counts[3] >= 3, counts
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.task_id.startswith(f"level{t.level}/") for t in tasks)


def test_every_suite_task_declares_small_sizes_that_shrink_it():
    for task in load_suite(profile="small"):
        assert task.size_overrides, f"{task.task_id} has no SMALL_SIZES"
        module = build_module(task)  # every override names a real module constant
        assert all(getattr(module, k) == v for k, v in task.size_overrides.items())
    full = load_suite(profile="full", level=1, ids=[8])[0]
    assert full.size_profile == "full" and full.size_overrides == {}


def test_level_and_ids_select_by_numeric_prefix():
    tasks = load_suite(level=1, ids=[22, 8], profile="small")
    assert [t.task_id for t in tasks] == ["level1/22_Softmax", "level1/08_ReLU"]
    assert [t.task_id for t in load_suite(level=2, limit=3)] == [
        "level2/01_Gemm_ReLU", "level2/02_Gemm_BiasAdd_GELU", "level2/03_Gemm_Tanh_RowSum"]


def test_bad_level_id_and_path_name_the_problem(tmp_path):
    with pytest.raises(TaskError, match="no level 9 .*levels there: 1, 2, 3"):
        load_suite(level=9)
    with pytest.raises(TaskError, match="no task with id 999"):
        load_suite(level=1, ids=[999])
    with pytest.raises(TaskError, match="ids select within one level"):
        load_suite(ids=[1])
    missing = tmp_path / "nowhere"
    with pytest.raises(TaskError, match=str(missing)):
        load_suite(path=missing)
    with pytest.raises(TaskError, match="unknown size profile 'huge'"):
        load_suite(profile="huge")


def test_kernelbench_checkout_layout(tmp_path):
    root = tmp_path / "KernelBench-checkout"
    for i, name in ((1, "1_Square_matrix_multiplication_.py"), (2, "2_Standard_matrix_multiplication_.py"),
                    (19, "19_ReLU.py")):
        _write(root / "KernelBench" / "level1", name, n=16 + i)
    _write(root / "KernelBench" / "level2", "1_Conv2D_ReLU_BiasAdd.py")
    (root / "README.md").write_text("not a task")
    tasks = load_suite(path=root, level=1, ids=[1, 19], profile="full")
    assert [t.task_id for t in tasks] == ["level1/1_Square_matrix_multiplication_", "level1/19_ReLU"]
    assert all(t.level == 1 and t.size_profile == "full" for t in tasks)
    # the checkout's KernelBench/ folder itself works too, and level 2 is separate
    assert [t.task_id for t in load_suite(path=root / "KernelBench", level=2)] == ["level2/1_Conv2D_ReLU_BiasAdd"]
    assert len(load_suite(path=root, level=1)) == 3
    with pytest.raises(TaskError, match="no task with id 7 in .*level1 \\(ids there: 1..19\\)"):
        load_suite(path=root, level=1, ids=[7])


def test_user_folder_with_instructions_and_helpers(tmp_path):
    folder = tmp_path / "mine"
    _write(folder, "attention_op.py", extra='\nINSTRUCTIONS = "keep the output in fp32"\n')
    _write(folder, "norm_op.py")
    (folder / "helpers.py").write_text("def util():\n    return 1\n")  # not a task: skipped
    (folder / "INSTRUCTIONS.md").write_text("Target bf16 inputs. Do not change the signature.\n")
    tasks = load_suite(path=folder)
    assert [t.task_id for t in tasks] == ["attention_op", "norm_op"]
    assert tasks[0].instructions == "Target bf16 inputs. Do not change the signature.\n\nkeep the output in fp32"
    assert tasks[1].instructions == "Target bf16 inputs. Do not change the signature."
    assert tasks[0].size_overrides == {"N": 8}
    with pytest.raises(TaskError, match="has no level folders"):
        load_suite(path=folder, level=1)


def test_single_file_and_empty_folder(tmp_path):
    path = _write(tmp_path / "one", "my_task.py")
    (task,) = load_suite(path=path, profile="full")
    assert task.task_id == "my_task" and task.size_overrides == {}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.py").write_text("x = 1\n")
    with pytest.raises(TaskError, match="no KernelBench-format task files"):
        load_suite(path=empty)


def test_profile_auto_and_config(tmp_path):
    assert resolve_profile("auto", device="cuda:0") == "full"
    assert resolve_profile("auto", device="cpu") == "small"
    assert resolve_profile("small", device="cuda") == "small"
    cfg = SuiteConfig.from_config({"path": None, "level": 1, "ids": [8, 11], "profile": "auto", "limit": None})
    assert [t.task_id for t in cfg.load(device="cpu")] == ["level1/08_ReLU", "level1/11_Sigmoid"]
    assert all(t.size_profile == "full" for t in cfg.load(device="cuda"))
    with pytest.raises(ConfigError, match=r"unknown key 'tasks\.lvl'; allowed: path, level, ids, profile, limit"):
        SuiteConfig.from_config({"lvl": 1})
    with pytest.raises(TaskError, match="tasks.profile must be one of"):
        SuiteConfig.from_config({"profile": "medium"})
    with pytest.raises(TaskError, match="tasks.path is required"):
        SuiteConfig.from_config({"path": "???"})


def test_conf_group_files_match_the_config_keys():
    from omegaconf import OmegaConf
    conf = Path(__file__).resolve().parents[2] / "conf" / "tasks"
    for name in ("suite.yaml", "kernelbench.yaml"):
        keys = set(OmegaConf.to_container(OmegaConf.load(conf / name)))
        assert keys == {"path", "level", "ids", "profile", "limit"}, name
    SuiteConfig.from_config(OmegaConf.to_container(OmegaConf.load(conf / "suite.yaml")))


def test_missing_default_suite_says_how_to_fix(monkeypatch, tmp_path):
    import foundry.tasks.suite as suite
    monkeypatch.setattr(suite, "default_suite_path", lambda: tmp_path / "gone")
    with pytest.raises(TaskError, match="suite was not found at .*gone.*pass a path"):
        suite.load_suite()
    assert default_suite_path().name == "suite"
