from actors.parts import make_proposer

LLM = {"provider": "vllm", "base_url": "http://127.0.0.1:9/v1", "model": "m",
       "budget": {"max_calls": 100, "max_cost_usd": 8.0, "max_tokens": 1000}}


def _proposer(count):
    return make_proposer(llm=LLM, templates={}, on_llm_call=lambda r: None, seed=0,
                         island_index=0, island_count=count)


def test_each_island_gets_an_equal_share_of_the_run_llm_budget():
    budget = _proposer(4).config.budget
    assert (budget.max_calls, budget.max_tokens, budget.max_cost_usd) == (25, 250, 2.0)


def test_one_island_keeps_the_whole_budget():
    budget = _proposer(1).config.budget
    assert (budget.max_calls, budget.max_cost_usd) == (100, 8.0)
