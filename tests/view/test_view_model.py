"""What the page shows, computed from a real smoke run's directory (no browser)."""

from __future__ import annotations

import json
import time

from foundry.store import EvaluationLog, read_evaluations
from foundry.store.summary import summarize
from foundry.view.jsonsafe import script_json
from foundry.view.kernel import detail_json, highlight
from foundry.view.model import ROW_COLUMNS, RunReader, build_snapshot
from foundry.view.report_html import write_report_html
from view_run import ERROR_PAYLOAD, HOSTILE_TASK, SCRIPT_PAYLOAD


def test_the_snapshot_has_every_task_and_evaluation_of_the_run(view_run_dir):
    run_dir, _ = view_run_dir
    records = read_evaluations(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    snap = build_snapshot(run_dir)
    assert set(snap.task_order) == set(meta["tasks"]) and len(meta["tasks"]) == 5
    update = snap.update(0)
    assert update["reset"] and update["total"] == len(records) == len(update["rows"])
    assert [row[ROW_COLUMNS.index("eval_id")] for row in update["rows"]] == [r.eval_id for r in records]
    assert {t["task_id"] for t in update["tasks"]} == set(meta["tasks"])
    expected = summarize(records, task_ids=meta["tasks"])
    for view in update["tasks"]:
        assert view["summary"]["evaluations"] == expected[view["task_id"]].evaluations
        assert view["summary"]["best_speedup_eager"] == expected[view["task_id"]].best_speedup_eager


def test_an_update_carries_only_what_is_new(view_run_dir):
    run_dir, hostile = view_run_dir
    snap = build_snapshot(run_dir)
    total = len(snap.records)
    later = snap.update(total - 2)  # the page has all but the two hostile candidates
    assert not later["reset"] and later["since"] == total - 2
    assert [row[0] for row in later["rows"]] == [hostile["script"], hostile["error"]]
    assert [t["task_id"] for t in later["tasks"]] == [HOSTILE_TASK]
    assert snap.update(total)["rows"] == [] and snap.update(total)["tasks"] == []
    assert snap.update(total + 5)["reset"]  # a count this log never had: start again


def test_the_best_kernels_lineage_and_running_best(view_run_dir):
    run_dir, hostile = view_run_dir
    snap = build_snapshot(run_dir)
    relu = snap.tasks[HOSTILE_TASK]
    assert relu.best_eval_id == hostile["script"]
    assert [s.candidate_id for s in relu.lineage][1] == hostile["parent"]
    assert relu.lineage_end.endswith("has no parent (template)")
    rows = [r for r in snap.rows if r[ROW_COLUMNS.index("task_id")] == HOSTILE_TASK]
    bests = [r[ROW_COLUMNS.index("best_eager")] for r in rows]
    assert bests == sorted(bests, key=lambda b: -1 if b is None else b)  # never falls
    assert bests[-1] == relu.summary["best_speedup_eager"]
    cells = [c for cells in relu.archive.values() for c in cells]
    assert hostile["script"] in {c.eval_id for c in cells}


def test_kernel_detail_keeps_the_source_and_diffs_against_the_parent(view_run_dir):
    run_dir, hostile = view_run_dir
    snap = build_snapshot(run_dir)
    record = snap.by_eval[hostile["script"]]
    detail = detail_json(record, snap.by_candidate)
    assert "".join(detail["tokens"][1::2]) == record.candidate.source
    assert {"k", "nf"} & set(detail["tokens"][0::2])  # keywords, function names were told apart
    added = [line for kind, line in detail["diff"] if kind == "+"]
    assert any(SCRIPT_PAYLOAD in line for line in added)
    assert detail["parent_eval_id"] == snap.by_candidate[hostile["parent"]].eval_id
    failed = detail_json(snap.by_eval[hostile["error"]], snap.by_candidate)
    assert ERROR_PAYLOAD in failed["verdict"]["error"] and failed["verdict"]["stage"] == "compile"


def test_script_json_cannot_end_its_script_element():
    value = {"src": SCRIPT_PAYLOAD + " & \u2028", "x": float("nan"), "t": (1, 2)}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"src": value["src"], "x": None, "t": [1, 2]}


def test_highlight_is_lossless_on_odd_text():
    text = "x = '''unterminated\n\tüñí</script>\r\n" + "y" * 10
    assert "".join(highlight(text)[1::2]) == text.replace("\r\n", "\n")  # the lexer's line ends


def test_the_reader_rebuilds_only_when_the_run_changed(run_copy):
    run_dir, _ = run_copy
    reader = RunReader(run_dir)
    first = reader.snapshot()
    assert reader.snapshot() is first
    record = first.records[0]
    log = EvaluationLog(run_dir)
    log.append(record.candidate, record.result, evaluator="evaluator-0")
    log.close()
    assert reader.snapshot() is first  # handed back at once; the changed run is read meanwhile
    deadline = time.monotonic() + 60
    while reader.snapshot() is first and time.monotonic() < deadline:
        time.sleep(0.05)
    again = reader.snapshot()
    assert again is not first and len(again.records) == len(first.records) + 1
    assert reader.snapshot(fresh=True).records == again.records


def test_report_html_holds_the_linked_kernels_escaped(view_run_dir, tmp_path):
    run_dir, hostile = view_run_dir
    out = write_report_html(run_dir, tmp_path / "report.html")
    text = out.read_text()
    assert SCRIPT_PAYLOAD not in text and ERROR_PAYLOAD not in text
    assert text.count("<script") == 3  # the config, the data, the page's own script
    assert hostile["script"] in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    data = json.loads(text.split('id="kf-data">', 1)[1].split("</script>", 1)[0])
    snap = build_snapshot(run_dir)
    linked = snap.linked_eval_ids()
    assert set(data["details"]) == linked and len(data["update"]["rows"]) == len(snap.records)
    for view in snap.tasks.values():  # every kernel the page links to is in the file
        assert {s.eval_id for s in view.lineage} <= linked
        assert {c.eval_id for cells in view.archive.values() for c in cells} <= linked
    assert data["details"][hostile["script"]]["tokens"] is None  # its source is kept once, by candidate
    assert "".join(data["sources"][snap.by_eval[hostile["script"]].candidate.candidate_id][1::2]).endswith(
        SCRIPT_PAYLOAD + "\n")
