"""Reply parsing edge cases: fences, edits with tolerant matching, fallbacks, junk."""

from __future__ import annotations

from foundry.llm.parsing import parse_reply

PARENT = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = PARAMS["BLOCK"]

    def forward(self, x):
        y = torch.empty_like(x)
        return y
"""


def edit(search, replace):
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def test_last_fenced_block_with_modelnew_wins():
    text = ("First attempt:\n```python\nclass ModelNew: v = 1\n```\nHelper:\n"
            "```python\ndef helper(): pass\n```\nFinal:\n```python\nclass ModelNew: v = 2\n```")
    assert parse_reply(text).source == "class ModelNew: v = 2\n"


def test_unclosed_fence_from_truncated_reply():
    r = parse_reply("```python\nimport torch\nclass ModelNew:\n    pass\n")
    assert r.kind == "full" and "class ModelNew" in r.source


def test_tilde_and_four_backtick_fences():
    assert parse_reply("~~~py\nclass ModelNew: pass\n~~~").source == "class ModelNew: pass\n"
    inner = "````python\nx = '''```'''\nclass ModelNew: pass\n````"
    assert "x = '''```'''" in parse_reply(inner).source


def test_raw_code_without_fence():
    assert parse_reply("import torch\nclass ModelNew:\n    pass\n").kind == "full"


def test_reasoning_blocks_are_ignored():
    text = "<think>maybe ```python\nclass ModelNew: wrong = 1\n```</think>\n```python\nclass ModelNew: ok = 1\n```"
    assert parse_reply(text).source == "class ModelNew: ok = 1\n"


def test_exact_edit():
    r = parse_reply(edit("        y = torch.empty_like(x)", "        y = torch.zeros_like(x)"),
                    parent_source=PARENT)
    assert r.kind == "diff" and "torch.zeros_like(x)" in r.source and "matched loosely" not in r.note


def test_edit_with_wrong_indentation_is_reindented():
    r = parse_reply(edit("def forward(self, x):\n    y = torch.empty_like(x)",
                         "def forward(self, x):\n    y = torch.ones_like(x)"), parent_source=PARENT)
    assert r.kind == "diff" and "        y = torch.ones_like(x)\n" in r.source
    assert "    def forward(self, x):\n" in r.source and "matched loosely" in r.note
    compile(r.source, "c", "exec")


def test_edit_with_trailing_spaces_and_blank_lines():
    search = "    def __init__(self):   \n        super().__init__()\n\n\n        self.block = PARAMS[\"BLOCK\"]"
    r = parse_reply(edit(search, "    def __init__(self):\n        super().__init__()\n        self.block = 64"),
                    parent_source=PARENT)
    assert r.kind == "diff" and "self.block = 64" in r.source and 'PARAMS["BLOCK"]' not in r.source


def test_several_edits_apply_in_order():
    text = edit("import torch\n", "import math\nimport torch\n") + edit(
        "        return y", "        return y * 1")
    r = parse_reply(text, parent_source=PARENT)
    assert r.source.startswith("import math\nimport torch") and "return y * 1" in r.source
    assert r.note.startswith("2 edit(s) applied")


def test_failed_edit_falls_back_to_full_file():
    text = edit("not in parent", "x") + "\nOr the whole file:\n```python\nclass ModelNew: full = 1\n```"
    r = parse_reply(text, parent_source=PARENT)
    assert r.kind == "full" and r.source == "class ModelNew: full = 1\n" and "[1]" in r.note


def test_failed_edit_without_full_file_is_stage0():
    r = parse_reply(edit("not in parent", "x"), parent_source=PARENT)
    assert r.source == "" and r.kind == "none" and "not found" in r.note


def test_edits_without_parent():
    r = parse_reply(edit("a", "b"), parent_source=None)
    assert r.source == "" and "no parent" in r.note


def test_junk_replies_never_raise():
    for text in [None, "", "   ", "```", "``````", "<think>", "<<<<<<< SEARCH\n", "\x00\x01",
                 "```python\n```", "```python\ndef f(): pass\n```", "=======\n>>>>>>> REPLACE"]:
        r = parse_reply(text, parent_source=PARENT)
        assert r.source == "" and r.kind == "none" and r.note, text


def test_edit_that_removes_modelnew_is_rejected():
    r = parse_reply(edit("class ModelNew(nn.Module):", "class Other(nn.Module):"), parent_source=PARENT)
    assert r.source == "" and "does not define ModelNew" in r.note


def test_crlf_reply():
    r = parse_reply("```python\r\nclass ModelNew:\r\n    pass\r\n```\r\n")
    assert r.source == "class ModelNew:\n    pass\n"
