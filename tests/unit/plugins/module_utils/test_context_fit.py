# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.context_fit import (
    KEY_FIELDS,
    budget,
    analyse,
    fit_key,
    latest_run,
    parse_cache,
    read_cache_file,
    write_cache_entry,
)
from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_log import parse_startup

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def no_stream(window, one, left, model=82.10, reserve=4.0):
    return ("tensorfold: the CUDA memory budget fits no stream: one at a %d-token window takes %.2f GiB, "
            "and %.2f GiB is left after the model's %.2f GiB and the %.1f GiB reserve; lower --context, "
            "or free device memory" % (window, one, left, model, reserve))


def parallel_refusal(p, need, window, leaves, q):
    return ("tensorfold: --parallel %d needs %.2f GiB for its streams at a %d-token window, and the CUDA "
            "memory budget leaves %.2f GiB: serve --parallel %d, or lower --context" % (p, need, window, leaves, q))


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_no_stream_refusal_with_numeric_parallel_lets_every_stream_fit():
    # 8.00 GiB a stream at 1,048,576 tokens, 5.30 GiB left, PARALLEL=4: the engine admits 4 only
    # when 4 streams fit. Read conservatively (a stream up to 8.005 GiB, the budget down to
    # 5.295 GiB): 5.295 / (4 * 8.005) * 1048576 = 173393.6 -> 338 pages of 512.
    for pages in (True, False):
        found = analyse(no_stream(1048576, 8.00, 5.30), 1048576, "4", kv_pages=pages)
        assert found["refused"] is True
        assert found["kind"] == "no_stream"
        assert found["context"] == 173056
        assert found["reason"].startswith("tensorfold: the CUDA memory budget fits no stream")


def test_auto_parallel_needs_one_stream():
    # 5.295 / 8.005 * 1048576 = 693574.6 -> 1354 pages.
    text = no_stream(1048576, 8.00, 5.30)
    assert analyse(text, 1048576, "auto", kv_pages=True)["context"] == 693248
    assert analyse(text, 1048576, "auto", kv_pages=False)["context"] == 693248


def test_parallel_refusal_with_pages_on_is_answered_below_the_refused_window():
    # The case: a "--parallel 4 needs" refusal at 1,048,576 with pages on (the default)
    # was answered with 1,048,576 again. 4 streams need 24.00 GiB, 9.40 left.
    text = parallel_refusal(4, 24.00, 1048576, 9.40, 1)
    for pages in (True, False):
        found = analyse(text, 1048576, "4", kv_pages=pages)
        assert found["kind"] == "parallel"
        # 9.395 / 24.005 * 1048576 = 410389.5 -> 801 pages.
        assert found["context"] == 410112


def test_parallel_refusal_uses_the_streams_named_in_the_message():
    # 4 streams need 12.00 GiB at 262,144 tokens: 3 GiB each; 7.50 GiB leaves room for 2.5 streams.
    text = parallel_refusal(4, 12.00, 262144, 7.50, 2)
    found = analyse(text, 1048576, "4", kv_pages=False)
    assert found["kind"] == "parallel"
    # 7.495 / 12.005 * 262144 = 163662.3 -> 319 pages.
    assert found["context"] == 163328


def test_answer_never_exceeds_requested_window():
    text = no_stream(1048576, 1.00, 50.00)  # everything fits many times over
    assert analyse(text, 262144, "4")["context"] == 262144
    assert analyse(text, 262145, "4")["context"] == 262144  # rounded down to a page


def test_requested_window_not_a_page_multiple_rounds_down():
    text = no_stream(1048576, 8.00, 100.0)
    assert analyse(text, 1000, "1", page_rows=512)["context"] == 512


def test_nothing_fits_when_not_even_one_page_does():
    text = no_stream(1048576, 8000.00, 0.01)
    found = analyse(text, 1048576, "4")
    assert found["refused"] is True
    assert found["context"] is None


def test_weights_refusal_has_no_answer():
    text = ("tensorfold: the checkpoint's 90.5 GiB of weights do not fit the 87.6 GiB the CUDA memory budget "
            "grants (91.6 GiB free less a 4.0 GiB reserve); free device memory or adjust "
            "TENSORFOLD_MEMORY_RESERVE_GIB / TENSORFOLD_CUDA_MEMORY_LIMIT_GB")
    found = analyse(text, 1048576, "4")
    assert found == {"refused": True, "kind": "weights", "context": None, "reason": text,
                     "streams": None, "window": None}


def test_weights_refusal_wins_over_a_window_refusal_of_the_other_rank():
    text = no_stream(1048576, 8.00, 5.30) + "\n" + (
        "tensorfold: the checkpoint's 90.5 GiB of weights do not fit the 87.6 GiB the CUDA memory budget "
        "grants (91.6 GiB free less a 4.0 GiB reserve); free device memory")
    found = analyse(text, 1048576, "4")
    assert found["kind"] == "weights" and found["context"] is None


def test_model_window_refusal_gives_the_model_window():
    text = "tensorfold: --context 1048576 exceeds this model's 524288-token window"
    found = analyse(text, 1048576, "4")
    assert found["kind"] == "window"
    assert found["context"] == 524288


def test_two_ranks_refusing_take_the_smaller_answer():
    rank1 = no_stream(1048576, 8.00, 7.10)
    rank0 = no_stream(1048576, 8.00, 5.30)
    found = analyse(rank1 + "\n" + rank0, 1048576, "auto")
    assert found["context"] == 693248
    assert "5.30 GiB is left" in found["reason"]


def test_startup_line_gives_streams_and_window():
    line = ("CUDA sm_120 device 0 (NVIDIA RTX PRO 6000 Blackwell Workstation Edition): model 82.10 GiB; "
            "3 streams at once, 2.31 GiB each at a 262144-token window, of 9.4 GiB left after a 4.0 GiB "
            "reserve; prompts in 2048-row chunks")
    assert parse_startup("noise\n" + line + "\n") == (3, 262144)
    found = analyse(line, 1048576, "4")
    assert found["refused"] is False and found["context"] is None
    assert (found["streams"], found["window"]) == (3, 262144)


def test_single_stream_startup_line():
    line = ("CUDA sm_120 device 0 (NVIDIA RTX PRO 6000): model 80.00 GiB; 1 stream at once, 8.00 GiB each at a "
            "1048576-token window, of 8.5 GiB left after a 4.0 GiB reserve; prompts in 2048-row chunks")
    assert parse_startup(line) == (1, 1048576)


def test_clean_log_is_not_refused():
    found = analyse("rank 0: settings agreed, NCCL joined\nserving GLM-5.3-Flash at http://0.0.0.0:8020/v1", 1048576)
    assert found["refused"] is False and found["kind"] is None and found["reason"] == ""


def test_recorded_standin_log_refusal():
    found = analyse(_fixture("rank0-refused.log"), 1048576, "auto", kv_pages=True)
    assert found["kind"] == "no_stream"
    assert found["context"] == 693248


def test_fit_key_changes_with_every_field():
    base = dict((name, "x") for name in KEY_FIELDS)
    keys = {fit_key(base)}
    for name in KEY_FIELDS:
        changed = dict(base)
        changed[name] = "y"
        keys.add(fit_key(changed))
    assert len(keys) == len(KEY_FIELDS) + 1
    assert fit_key(dict(base)) == fit_key(dict(base))


def test_cache_round_trip(tmp_path):
    path = str(tmp_path / "state" / "context-fit.tsv")
    assert read_cache_file(path) == ({}, {})
    assert write_cache_entry(path, "abc", 694272, now="2026-11-29T10:00:00Z") is True
    assert write_cache_entry(path, "abc", 694272) is False
    assert write_cache_entry(path, "def", 512, now="2026-11-29T11:00:00Z") is True
    entries, recorded = read_cache_file(path)
    assert entries == {"abc": 694272, "def": 512}
    assert recorded["abc"] == "2026-11-29T10:00:00Z"
    with open(path) as handle:
        lines = handle.read().splitlines()
    assert lines[1] == "abc\t694272\t2026-11-29T10:00:00Z"


def test_parse_cache_skips_broken_lines_and_later_lines_win():
    text = "# header\nabc\t100\t\nbroken line\nxyz\tnotanumber\nabc\t200\tt\n"
    assert parse_cache(text) == {"abc": 200}


def test_a_refusals_budget_is_the_memory_it_says_is_left():
    assert budget("tensorfold: the CUDA memory budget fits no stream: one at a 1048576-token window takes 8.00 GiB, "
                  "and -4.00 GiB is left after the model's 84.50 GiB and the 4.0 GiB reserve; lower --context") == "-4.00"
    assert budget("tensorfold: --parallel 4 needs 16.00 GiB for its streams at a 524288-token window, and the CUDA "
                  "memory budget leaves 9.30 GiB: serve --parallel 2, or lower --context") == "9.30"
    assert budget("tensorfold: --context 2000000 exceeds this model's 1048576-token window") is None


RUN_START = "runner: 2026-12-0%dT10:00:00Z starting rank 1 and rank 0 (window 1048576)\n"


def test_the_latest_run_starts_at_the_last_runner_line_even_after_an_unfinished_line():
    # An earlier start refused with 2.00 GiB left; the last one with 9.40 GiB. A rank killed
    # mid-line, or a progress line ended by a carriage return, leaves no line break before the
    # runner's next line: that start is still the last one.
    earlier = RUN_START % 1 + no_stream(1048576, 10.00, 2.00) + "\n"
    last = RUN_START % 2 + no_stream(1048576, 10.00, 9.40) + "\n"
    for between in ("rank 0: hashing shard 7/40\n", "rank 0: hashing shard 7/40", "hashing 7/40\r",
                    "\x1b[32mhashing 7/40\x1b[0m"):
        run = latest_run(earlier + between + last)
        assert run.startswith("runner: 2026-12-02T10:00:00Z"), repr(between)
        assert analyse(run, 1048576, "auto")["context"] == 984576
    assert latest_run(no_stream(1048576, 10.00, 2.00)) == no_stream(1048576, 10.00, 2.00)  # no runner line: all
