import pyarrow as pa

from foundry.types import Candidate, EvalResult, Stage, content_hash


def test_candidate_id_is_content_hash_of_task_backend_source_and_params():
    a = Candidate.make(task_id="t", source="x", backend="c", params={"B": 1})
    b = Candidate.make(task_id="t", source="x", backend="c", params={"B": 1})
    c = Candidate.make(task_id="t", source="x", backend="c", params={"B": 2})
    d = Candidate.make(task_id="t", source="x", backend="triton", params={"B": 1})
    assert a.candidate_id == b.candidate_id
    assert len({a.candidate_id, c.candidate_id, d.candidate_id}) == 3


def test_rows_round_trip_through_arrow():
    cand = Candidate.make(task_id="t", source="src", backend="c", params={"B": 128},
                          parent_ids=("p1", "p2"), island_id=3, generation=7, origin="llm")
    res = EvalResult(candidate_id=cand.candidate_id, task_id="t", stage=int(Stage.CORRECT),
                     correct=True, flags=("slow",), runtime_ms=1.5, speedup_eager=2.0,
                     descriptor=(1, 2, 3), metrics={"tuning": [{"B": 128, "ms": 1.5}]})
    for rec, cls in ((cand, Candidate), (res, EvalResult)):
        table = pa.Table.from_pylist([rec.to_row()])
        back = cls.from_row(table.to_pylist()[0])
        assert back == rec


def test_fitness_ladder_correct_always_outranks_incorrect():
    wrong = EvalResult(candidate_id="a", task_id="t", stage=int(Stage.VALUE), correct=False)
    slow = EvalResult(candidate_id="b", task_id="t", stage=int(Stage.CORRECT), correct=True,
                      speedup_eager=0.01)
    assert slow.fitness > wrong.fitness
    assert Stage.parse("shape") is Stage.SHAPE and Stage.parse(2) is Stage.RUNTIME


def test_content_hash_separates_parts():
    assert content_hash("ab", "c") != content_hash("a", "bc")


def test_correct_without_a_timing_still_outranks_wrong_values():
    untimed = EvalResult(candidate_id="c", task_id="t", stage=int(Stage.CORRECT), correct=True)
    wrong = EvalResult(candidate_id="a", task_id="t", stage=int(Stage.VALUE), correct=False)
    assert untimed.fitness > wrong.fitness
