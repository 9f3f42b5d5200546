# -*- coding: utf-8 -*-
"""context_fit reading the engine's refusals as they land in a rank log: negative budgets, a line
split by a wrap or by another line (NCCL's debug output shares the log), terminal escapes, the
--parallel a refusal names, and what a refused start can be told."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import textwrap

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import context_fit
from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_log

NO_STREAM = ("tensorfold: the CUDA memory budget fits no stream: one at a 1048576-token window takes 10.00 GiB, "
             "and 9.40 GiB is left after the model's 82.10 GiB and the 4.0 GiB reserve; lower --context, "
             "or free device memory")
# What the stand-in engine prints when TENSORFOLD_CUDA_MEMORY_LIMIT_GB is below the reserve.
WEIGHTS_NEGATIVE = ("tensorfold: the checkpoint's 84.5 GiB of weights do not fit the -4.0 GiB the CUDA memory "
                    "budget grants (8.0 GiB free less a 12.0 GiB reserve, capped by "
                    "TENSORFOLD_CUDA_MEMORY_LIMIT_GB=8); free device memory or adjust "
                    "TENSORFOLD_MEMORY_RESERVE_GIB / TENSORFOLD_CUDA_MEMORY_LIMIT_GB")
NCCL = "node:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>"
# 9.395 / 10.005 * 1048576 = 984629.2 -> 1923 pages of 512, one stream.
ONE_STREAM = 984576


def test_weights_refusal_with_a_negative_budget_is_a_weights_refusal():
    found = context_fit.analyse(WEIGHTS_NEGATIVE, 1048576, "4")
    assert (found["refused"], found["kind"], found["context"]) == (True, "weights", None)
    assert found["reason"] == WEIGHTS_NEGATIVE


@pytest.mark.parametrize("left", ["-0.50", "-0.00"])
def test_no_stream_refusal_with_nothing_or_less_left_has_no_answer(left):
    text = NO_STREAM.replace("9.40 GiB is left", "%s GiB is left" % left)
    found = context_fit.analyse(text, 1048576, "auto")
    assert (found["refused"], found["kind"], found["context"]) == (True, "no_stream", None)


def test_parallel_refusal_with_a_negative_budget_has_no_answer():
    text = ("tensorfold: --parallel 4 needs 40.00 GiB for its streams at a 1048576-token window, and the CUDA "
            "memory budget leaves -1.25 GiB: serve --parallel 0, or lower --context")
    found = context_fit.analyse(text, 1048576, "4")
    assert (found["refused"], found["kind"], found["context"]) == (True, "parallel", None)


@pytest.mark.parametrize("split", [
    pytest.param(lambda line: "\n".join(line[i:i + 80] for i in range(0, len(line), 80)), id="cut-at-80"),
    pytest.param(lambda line: "\n".join(textwrap.wrap(line, 80)), id="word-wrap-80"),
    pytest.param(lambda line: line.replace("GiB, and ", "GiB, and\n"), id="one-break"),
    pytest.param(lambda line: line[:100] + "\n" + NCCL + "\n" + line[100:], id="nccl-line-inside"),
    pytest.param(lambda line: line[:60] + "\r\n\r\n" + NCCL + "\r\n" + line[60:150] + "\r\n" + line[150:],
                 id="crlf-blank-and-nccl"),
])
def test_a_refusal_split_over_lines_is_joined_back(split):
    log = "rank 0: settings agreed, NCCL joined\n" + split("2026-11-29T10:00:00Z " + NO_STREAM) + "\nrunner: done\n"
    found = context_fit.analyse(log, 1048576, "auto")
    assert (found["kind"], found["context"]) == ("no_stream", ONE_STREAM)
    assert found["reason"] == "2026-11-29T10:00:00Z " + NO_STREAM  # the engine's own text


@pytest.mark.parametrize("prefix", [
    pytest.param(lambda n: "2026-11-29T10:00:00.00%dZ " % n, id="timestamp-on-each-line"),
    pytest.param(lambda n: "[rank0] ", id="rank-tag-on-each-line"),
    pytest.param(lambda n: "[rank0] 10:00:0%d " % n, id="tag-and-time"),
])
@pytest.mark.parametrize("wrap", [
    pytest.param(lambda line: textwrap.wrap(line, 80), id="word-wrap-80"),
    pytest.param(lambda line: [line[i:i + 70] for i in range(0, len(line), 70)], id="cut-at-70"),
])
def test_a_refusal_split_over_lines_that_each_carry_a_prefix_is_joined_back(prefix, wrap):
    # A log writer that stamps every line (a timestamp, a rank's tag) puts the same prefix before
    # each piece of a wrapped refusal: it is taken off the pieces the refusal goes on over.
    log = "\n".join(prefix(n) + piece for n, piece in enumerate(wrap(NO_STREAM)))
    found = context_fit.analyse(log, 1048576, "auto")
    assert (found["kind"], found["context"]) == ("no_stream", ONE_STREAM)
    assert found["reason"] == prefix(0) + NO_STREAM


def test_split_refusals_of_every_kind_are_read():
    window = "tensorfold: --context 1048576 exceeds this model's 262144-token window"
    found = context_fit.analyse(window.replace("this ", "this\n"), 1048576, "4")
    assert (found["kind"], found["context"]) == ("window", 262144)
    found = context_fit.analyse(WEIGHTS_NEGATIVE.replace(" of weights", "\n" + NCCL + "\nof weights"), 1048576, "4")
    assert found["kind"] == "weights"
    parallel = ("tensorfold: --parallel 4 needs 24.00 GiB for its streams at a 1048576-token window, and the CUDA "
                "memory budget leaves 9.40 GiB: serve --parallel 1, or lower --context")
    found = context_fit.analyse(parallel.replace("--para", "--para\n", 1), 1048576, "4")
    assert (found["kind"], found["context"]) == ("parallel", 410112)


def test_a_split_refusal_is_joined_only_over_other_output_within_a_few_lines():
    head, rest = NO_STREAM[:100], NO_STREAM[100:]
    # Within the look-ahead and over NCCL's lines: joined.
    nccl = "\n".join([NCCL] * (context_fit.LOOKAHEAD - 1))
    assert context_fit.analyse(head + "\n" + nccl + "\n" + rest, 1048576, "auto")["context"] == ONE_STREAM
    # Past the look-ahead, or over a line that is not clearly other output: not a refusal.
    nccl = "\n".join([NCCL] * context_fit.LOOKAHEAD)
    assert context_fit.analyse(head + "\n" + nccl + "\n" + rest, 1048576, "auto")["refused"] is False
    assert context_fit.analyse(head + "\nloading shard 3 of 40\n" + rest, 1048576, "auto")["refused"] is False
    # A cut-off refusal followed by another rank's whole one: only the whole one counts.
    other = NO_STREAM.replace("9.40", "5.30")
    found = context_fit.find_refusals(NO_STREAM[:120] + "\n" + other + "\nrunner: rank 0 exited with status 1")
    assert [(line, kind) for line, kind, _match, _text in found] == [(1, "no_stream")]


def test_a_whole_refusal_inside_a_split_one_is_still_read():
    # Rank 1's whole refusal lands between the two parts of rank 0's (a shared terminal).
    rank1 = NO_STREAM.replace("9.40", "5.30")
    found = context_fit.find_refusals(NO_STREAM[:100] + "\n" + rank1 + "\n" + NO_STREAM[100:])
    assert [(line, kind) for line, kind, _match, _text in found] == [(0, "no_stream"), (1, "no_stream")]
    assert found[0][3] == NO_STREAM and found[1][3] == rank1


@pytest.mark.parametrize("escaped", [
    NO_STREAM.replace("10.00", "\x1b[1m10.00\x1b[0m"),
    NO_STREAM.replace("1048576-token", "\x1b[31m1048\x1b[0m576-token"),
    "\x1b[2K\x1b[31m" + NO_STREAM.replace("9.40 GiB", "\x1b[1;33m9.40\x1b[0m GiB") + "\x1b[0m",
])
def test_terminal_escapes_inside_a_refusal_are_ignored(escaped):
    found = context_fit.analyse(escaped, 1048576, "auto")
    assert (found["kind"], found["context"], found["reason"]) == ("no_stream", ONE_STREAM, NO_STREAM)


def test_terminal_escapes_inside_the_startup_line_are_ignored():
    line = ("CUDA sm_120 device 0 (card): model 84.50 GiB; \x1b[1m3\x1b[0m streams at once, 0.50 GiB each at a "
            "262144-token window, of 5.3 GiB left after a 4.0 GiB reserve; prompts in 2048-row chunks")
    assert engine_log.parse_startup(line) == (3, 262144)


@pytest.mark.parametrize("configured", ["auto", "1", "4", "8"])
def test_a_parallel_refusal_is_answered_for_the_parallel_it_names(configured):
    # rank_container_engine_args may carry --parallel 8 whatever PARALLEL says.
    text = ("tensorfold: --parallel 8 needs 80.00 GiB for its streams at a 1048576-token window, and the CUDA "
            "memory budget leaves 9.40 GiB: serve --parallel 0, or lower --context")
    # 8 streams of up to 80.005 / 8 GiB each in 9.395 GiB: 9.395 / 80.005 * 1048576 = 123131.3 -> 240 pages.
    assert context_fit.analyse(text, 1048576, configured)["context"] == 122880
    fits = context_fit.what_fits(text, 1048576, configured)
    assert fits == {"context": 122880, "parallel": "8", "one_stream": ONE_STREAM}


def test_what_fits_names_the_setting_and_one_stream():
    assert context_fit.what_fits(NO_STREAM, 1048576, "4") == {
        "context": 245760, "parallel": "4", "one_stream": ONE_STREAM}
    tight = NO_STREAM.replace("9.40 GiB is left", "0.01 GiB is left")
    # One stream: 0.005 / 10.005 * 1048576 = 524 -> 512; four: not one page.
    assert context_fit.what_fits(tight, 1048576, "4") == {"context": None, "parallel": "4", "one_stream": 512}
    empty = NO_STREAM.replace("9.40 GiB is left", "-0.50 GiB is left")
    assert context_fit.what_fits(empty, 1048576, "auto") == {"context": None, "parallel": "auto", "one_stream": None}
    assert context_fit.what_fits(WEIGHTS_NEGATIVE, 1048576, "4")["one_stream"] is None
    assert context_fit.what_fits("serving", 1048576, "4") == {"context": None, "parallel": None, "one_stream": None}


@pytest.mark.parametrize("value, bad", [("auto", False), ("AUTO", False), (" 4 ", False), ("1", False),
                                        ("0", True), ("00", True), ("-1", True), ("many", True), ("", True)])
def test_parallel_problem_rejects_what_the_engine_does_not_take(value, bad):
    problem = context_fit.parallel_problem(value)
    assert (problem is not None) is bad
    if bad:
        assert "at least 1" in problem and repr(value) in problem
