"""benchmarks/task_args.py: the benchmark scripts' shared task selection (--path, --level,
--only, --profile)."""

from __future__ import annotations

import argparse

import pytest

from support.benchmark_script import load_benchmark

TASK = '''import torch
import torch.nn as nn

N = 64
SMALL_SIZES = {{"N": 8}}


class Model(nn.Module):
    def forward(self, x):
        return torch.{op}(x)


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
'''


def _parser(**kw):
    ap = argparse.ArgumentParser()
    load_benchmark("task_args").add_task_arguments(ap, **kw)
    return ap


def _folder(tmp_path):
    level = tmp_path / "level1"
    level.mkdir()
    for name, op in (("1_Relu", "relu"), ("2_Tanh", "tanh"), ("3_Sigmoid", "sigmoid")):
        (level / f"{name}.py").write_text(TASK.format(op=op))
    return tmp_path


def test_only_keeps_tasks_whose_id_contains_any_substring(tmp_path):
    task_args = load_benchmark("task_args")
    args = _parser().parse_args(["--path", str(_folder(tmp_path)), "--only", "Tanh", "3_", "--profile", "small"])
    tasks = task_args.selected_tasks(args)
    assert [t.task_id for t in tasks] == ["level1/2_Tanh", "level1/3_Sigmoid"]
    assert tasks[0].size_profile == "small" and tasks[0].size_overrides == {"N": 8}  # the profile asked for


def test_no_only_keeps_every_task_and_a_script_may_fix_the_profile(tmp_path):
    task_args = load_benchmark("task_args")
    args = _parser(profile=None).parse_args(["--path", str(_folder(tmp_path))])
    assert not hasattr(args, "profile")
    tasks = task_args.selected_tasks(args, profile="full")
    assert len(tasks) == 3 and tasks[0].size_profile == "full" and not tasks[0].size_overrides


def test_bad_profile_is_refused_by_the_parser():
    with pytest.raises(SystemExit):
        _parser().parse_args(["--profile", "huge"])
