"""The shell blocks of README.md, docs/ and the benchmarks' READMEs: each is marked, and
each marked `run` (the ones that take under a minute) runs as written and exits 0, from a
stand-in for the project root whose output folders are its own. The others are reported
as skipped, with the reason their marker gives."""

from __future__ import annotations

import pytest

from support.doc_blocks import ROOT, ShellBlock, all_blocks, run_block, scratch_project, shell_blocks

BLOCK_TIMEOUT_S = 150  # a quick block takes under a minute alone; room for a loaded 2-core machine

BLOCKS = all_blocks()


def test_every_shell_block_is_marked_run_or_skip_with_a_reason():
    assert BLOCKS, "no shell blocks found: the page list or the parser is wrong"
    unmarked = [b.name for b in BLOCKS if b.action == ""]
    no_reason = [b.name for b in BLOCKS if b.action == "skip" and not b.reason]
    assert not unmarked, f"shell blocks without a <!-- shell-test: run|skip REASON --> line before them: {unmarked}"
    assert not no_reason, f"skipped shell blocks without a reason: {no_reason}"


def test_the_readme_keeps_its_two_commands_and_runs_quick_blocks():
    readme = [b for b in BLOCKS if b.page == "README.md"]
    texts = [b.text.strip() for b in readme]
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(t for t in texts if "pytest" in t)
    assert test_command in ci, "the README's test command is not what .ci/run runs"
    assert any(t.endswith("python -m foundry +exp=kernelbench") and "pip install -e ." in t for t in texts)
    assert any(b.action == "run" for b in readme)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_shell_block(block: ShellBlock, tmp_path):
    if block.action != "run":
        pytest.skip(f"{block.name}: {block.reason or 'not marked'}")
    project = scratch_project(tmp_path / "project")
    done = run_block(block, cwd=project, cache_dir=tmp_path / "cache", timeout_s=BLOCK_TIMEOUT_S)
    assert done.returncode == 0, (f"{block.name} exited {done.returncode}:\n{block.text}\n"
                                  f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")


def test_the_runner_fails_a_failing_block_and_finds_unmarked_ones(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- shell-test: run -->\n```bash\ntrue\nfalse\necho never\n```\n\n"
                    "```bash\necho unmarked\n```\n\n<!-- shell-test: skip needs a GPU -->\n```sh\nnvidia-smi\n```\n")
    failing, unmarked, skipped = shell_blocks(page, root=tmp_path)
    assert (failing.action, unmarked.action, skipped.action) == ("run", "", "skip")
    assert skipped.reason == "needs a GPU" and failing.line == 4
    done = run_block(failing, cwd=tmp_path, cache_dir=tmp_path / "cache", timeout_s=30)
    assert done.returncode == 1 and "never" not in done.stdout
    ok = ShellBlock(page="page.md", line=1, text='test -n "$FOUNDRY_CACHE_DIR" && python -c "print(6 * 7)"\n',
                    action="run", reason="")
    done = run_block(ok, cwd=tmp_path, cache_dir=tmp_path / "cache", timeout_s=60)
    assert done.returncode == 0 and done.stdout.strip() == "42"
