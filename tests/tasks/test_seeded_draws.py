"""Seeded draws from several threads at once (the judge's lanes in one process) give
each thread the values of its own seed: the global generators are held from seeding to
the last draw."""

from __future__ import annotations

import threading

import torch

from foundry.evaluate.trial_inputs import generate_on
from foundry.tasks.inputs import InputSpec, make_init_inputs, make_inputs, seeded


class _Module:
    @staticmethod
    def get_inputs():
        return [torch.randn(128, 128), torch.randint(0, 9, (64,))]

    @staticmethod
    def get_init_inputs():
        return [torch.randn(4)]


def test_draws_in_other_threads_do_not_change_a_threads_inputs():
    want = make_inputs(_Module, InputSpec(5))
    want_device = generate_on(_Module, InputSpec(5, "heavy"), torch.device("cpu"))
    with seeded(3):
        want_params = torch.nn.Linear(16, 16).weight.detach().clone()
    stop = threading.Event()

    def other():  # another lane, drawing all the time
        k = 0
        while not stop.is_set():
            make_inputs(_Module, InputSpec(1000 + k))
            make_init_inputs(_Module, k)
            k += 1
    threads = [threading.Thread(target=other) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        bad = 0
        for _ in range(200):
            got = make_inputs(_Module, InputSpec(5))
            dev = generate_on(_Module, InputSpec(5, "heavy"), torch.device("cpu"))
            with seeded(3):
                params = torch.nn.Linear(16, 16).weight.detach()
            bad += not (all(torch.equal(a, b) for a, b in zip(got, want))
                        and all(torch.equal(a, b) for a, b in zip(dev, want_device))
                        and torch.equal(params, want_params))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert bad == 0
