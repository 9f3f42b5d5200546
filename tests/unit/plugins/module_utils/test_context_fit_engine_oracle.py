# -*- coding: utf-8 -*-
"""context_fit against an engine simulated from the engine contract, over thousands of random
cards (written from the contract's text, not from context_fit's arithmetic).

The contract: a stream's memory grows linearly with its window; the engine refuses a window when
one stream does not fit what is left ("fits no stream"), and a numeric --parallel P when P
streams do not fit ("--parallel P needs ... leaves ..."), with shared KV pages on or off; it
prints its figures with two decimals. For each random card the test prints the refusal the
engine would print at the first window, lets context_fit answer, and checks:
* the engine really admits the answer, on every rank that refused;
* the next page up is refused by some engine that prints the very same text (the printed
  figures cannot promise it fits), unless it is above the window asked for.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import random

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.context_fit import analyse

GIB = 1024.0 ** 3


class Engine(object):
    """One rank: memory left after weights and reserve (GiB), and KV bytes per token."""

    def __init__(self, left_gib, bytes_per_token):
        self.left = left_gib
        self.per_token = bytes_per_token

    def stream_gib(self, window):
        return window * self.per_token / GIB

    def admits(self, window, parallel):
        one = self.stream_gib(window)
        if one > self.left:
            return False
        if parallel == "auto":
            return True
        return int(parallel) * one <= self.left

    def refusal(self, window, parallel):
        one = self.stream_gib(window)
        if one > self.left:
            return ("tensorfold: the CUDA memory budget fits no stream: one at a %d-token window takes %.2f GiB, "
                    "and %.2f GiB is left after the model's 84.50 GiB and the 4.0 GiB reserve; lower --context, "
                    "or free device memory" % (window, one, self.left))
        if parallel != "auto" and int(parallel) * one > self.left:
            return ("tensorfold: --parallel %d needs %.2f GiB for its streams at a %d-token window, and the CUDA "
                    "memory budget leaves %.2f GiB: serve --parallel %d, or lower --context"
                    % (int(parallel), int(parallel) * one, window, self.left, int(self.left // one)))
        return None


def extreme_twin(text, window):
    """The engine, among those printing exactly ``text``, with the most cost and the least budget."""
    import re
    numbers = re.findall(r"([0-9]+\.[0-9]{2}) GiB", text)

    def push(printed, direction):
        value = float(printed)
        step = 0.005 * (1 - 1e-9)
        candidate = value + direction * step
        assert "%.2f" % candidate == printed or "%.2f" % (value + direction * step * 0.999) == printed
        return candidate if "%.2f" % candidate == printed else value + direction * step * 0.999

    if "fits no stream" in text:
        cost, left = push(numbers[0], +1), push(numbers[1], -1)
        return Engine(left, cost * GIB / window)
    asked = int(re.search(r"--parallel (\d+) needs", text).group(1))
    need, left = push(numbers[0], +1), push(numbers[1], -1)
    return Engine(left, need / asked * GIB / window)


def random_rank(rng):
    left = rng.uniform(0.05, 40.0)
    kib_per_token = rng.choice([4, 8, 16]) * rng.uniform(0.5, 2.0)
    return Engine(left, kib_per_token * 1024)


@pytest.mark.parametrize("kv_pages", [True, False])
def test_answers_are_admitted_and_maximal_over_random_engines(kv_pages):
    rng = random.Random(5300 + kv_pages)
    checked = refused_twice = 0
    for _case in range(3000):
        parallel = rng.choice(["auto", "1", "2", "4", "8", str(rng.randint(1, 8))])
        asked = rng.choice([1048576, 1048576, 524288, 700001])
        page = rng.choice([512, 512, 256])
        ranks = [random_rank(rng), random_rank(rng)]
        texts = [r.refusal(asked, parallel) for r in ranks]
        refusing = [(r, t) for r, t in zip(ranks, texts) if t]
        if not refusing:
            continue
        refused_twice += len(refusing) == 2
        found = analyse("\n".join(t for t in texts if t), asked, parallel, kv_pages=kv_pages, page_rows=page)
        assert found["refused"]
        answer = found["context"]
        # The largest window every refusing rank admits for sure, searched page by page.
        if answer is None:
            for rank, text in refusing:
                twin = extreme_twin(text, asked)
                if twin.admits(page, parallel):
                    break
            else:
                continue
            pytest.fail("no answer although one page fits every twin: %r" % texts)
        checked += 1
        assert answer % page == 0 and page <= answer <= asked
        for rank, text in refusing:
            assert rank.admits(answer, parallel), (texts, answer)
        if answer + page <= asked:
            assert any(not extreme_twin(text, asked).admits(answer + page, parallel) for _r, text in refusing), \
                (texts, answer)
    assert checked > 1000 and refused_twice > 100


def test_rounding_is_what_makes_the_answer_conservative():
    # A card whose true figures sit just under the printed ones: reading 8.00 and 5.30 as exact
    # would ask for a window the engine refuses.
    engine = Engine(5.2951, 8.00499 * GIB / 1048576)
    text = engine.refusal(1048576, "4")
    assert "takes 8.00 GiB" in text and "5.30 GiB is left" in text
    naive = int(math.floor(5.30 / (4 * 8.00) * 1048576)) // 512 * 512
    assert not engine.admits(naive, "4")
    answer = analyse(text, 1048576, "4")["context"]
    assert engine.admits(answer, "4")
