# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The largest context window that fits, worked out from the engine's own figures.

``tensorfold-native`` fixes its window at start and refuses one that does not fit, printing
the figures it used (see docs/rank_container.md, "How CONTEXT=auto finds the window"):

* ``the CUDA memory budget fits no stream: one at a W-token window takes X GiB, and Y GiB is
  left after ...``: one stream's cost at W tokens and the budget left for streams;
* ``--parallel P needs A GiB for its streams at a W-token window, and the CUDA memory budget
  leaves B GiB: ...``: P streams' cost at W tokens and the budget;
* ``the checkpoint's G GiB of weights do not fit ...``: no window helps;
* ``--context N exceeds this model's W-token window``: W is the most the model takes.

A budget may be printed negative (a reserve above the free memory). A refusal is read on one line
as the engine prints it, or split over a few lines (wrapped, or with another line such as NCCL's
debug output in between, since a rank's stdout and stderr share one log, or with the first line's
prefix, a timestamp or a rank's tag, on each piece); terminal escapes are removed first.

A stream's memory grows linearly with its window, so a refusal gives the cost of one token.
The engine admits a numeric ``--parallel P`` only when P streams fit at the window, with shared
KV pages on or off (it counts streams as the memory left over one stream's cost); ``auto`` needs
one stream. The answer is the largest multiple of ``page_rows``, not above the requested window,
for which that many streams fit the budget the message names.

Arithmetic is exact (fractions of the printed decimals). The engine prints its figures rounded
(``%.2f``), so the true cost may be up to half a unit of the last digit higher and the budget that
much lower: the answer fits for every value the printed text can stand for, so the engine really
admits it, and it is the largest window that does.

The cache is a TSV file, one ``key<TAB>context<TAB>recorded-at`` line per key, where the key is
a fingerprint of everything the fit depends on (see :func:`fit_key`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import itertools
import os
import re
import time

from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_log import INT as _INT, NUM as _NUM, clean, count as _int, parse_startup

# Budgets can be negative: the engine prints what is left, and a reserve or a
# TENSORFOLD_CUDA_MEMORY_LIMIT_GB above the free memory leaves less than nothing.
_SNUM = r"(-?[0-9]+(?:\.[0-9]+)?)"

NO_STREAM = re.compile(
    r"the CUDA memory budget fits no stream: one at an? " + _INT + r"-token window takes "
    + _NUM + r" GiB, and " + _SNUM + r" GiB is left after the model's " + _NUM
    + r" GiB and the " + _NUM + r" GiB reserve[^\n]*")
PARALLEL = re.compile(
    r"--parallel " + _INT + r" needs " + _NUM + r" GiB for its streams at an? " + _INT
    + r"-token window, and the CUDA memory budget leaves " + _SNUM + r" GiB[^\n]*")
WEIGHTS = re.compile(
    r"the checkpoint's " + _NUM + r" GiB of weights do not fit the " + _SNUM
    + r" GiB the CUDA memory budget grants[^\n]*")
WINDOW = re.compile(r"--context " + _INT + r" exceeds this model's " + _INT + r"-token window[^\n]*")
REFUSALS = (("no_stream", NO_STREAM), ("parallel", PARALLEL), ("weights", WEIGHTS), ("window", WINDOW))
# For a refusal split over lines: the same patterns with every space optional, matched on the
# pieces joined with nothing (a wrap may cut inside a word, or drop the space it broke at).
_LOOSE = tuple((kind, re.compile(pattern.pattern.replace(" ", " ?"))) for kind, pattern in REFUSALS)
# How a refusal begins; a line ending in part of one may continue on the next line.
_HEADS = ("the CUDA memory budget fits no stream", "--parallel ", "the checkpoint's ", "--context ")
# A line ending in the first part of a head, after a space (read on the reversed line, a match
# at its start is quick).
_CUT_HEAD = re.compile("(?:%s)(?:\\s|$)" % "|".join(
    re.escape(head[:size][::-1]) for head in _HEADS for size in range(len(head) - 1, 0, -1)))
# A split refusal is looked for over the line it begins on and at most this many more.
LOOKAHEAD = 5
# Lines that are clearly output of their own, which can land inside a split refusal (a rank's
# stdout and stderr share one log): NCCL's debug lines (NCCL_DEBUG=INFO), the engine's, the
# ranks' and the runner's own lines. They are passed over, never joined.
_OTHER = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ERROR|ABORT)\b|^(?:tensorfold: |rank \d+: |runner: |warning: "
                    r"|CUDA sm_|serving )")

# What the fit depends on, in the order the key is built from.
KEY_FIELDS = (
    "gpu_name", "gpu_memory_mib", "checkpoint_revision", "image_tag", "parallel", "kv",
    "kv_pages", "dense", "head", "vision", "drafter", "memory_reserve_gib",
)


def _printed_bounds(text):
    """The interval a figure printed as ``text`` stands for: the engine rounds to the printed
    decimals, so the true value lies within half a unit of the last digit either side."""
    # Imported here: engine_container's box reader sends this file to the box for every start, and
    # fractions (with decimal) would be most of what importing it costs the box.
    from fractions import Fraction  # pylint: disable=import-outside-toplevel
    value = Fraction(text)
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    half = Fraction(1, 2 * 10 ** decimals)
    return value - half, value + half


def largest_window(stream_cost_high, cost_window, budget_low, streams, requested, page_rows):
    """Largest multiple of page_rows <= requested such that ``streams`` streams of that window fit.

    ``stream_cost_high`` is the highest a stream's cost at ``cost_window`` tokens can be and
    ``budget_low`` the lowest the budget can be, given the printed figures: the answer fits for
    every true value the engine may have rounded, so the engine admits it. None when not one page
    fits. Exact arithmetic on fractions.
    """
    if budget_low <= 0:
        return None
    if stream_cost_high <= 0:
        fits = requested
    else:
        # streams * window * stream_cost_high / cost_window <= budget_low
        fits = (budget_low * cost_window) // (stream_cost_high * streams)
        # The engine admits equality; a strict margin of one token keeps a tie on the safe side.
        if fits * stream_cost_high * streams == budget_low * cost_window:
            fits -= 1
    window = min(int(fits), requested)
    window -= window % page_rows
    return window if window >= page_rows else None


def _may_continue(line):
    """Whether a line holds the beginning of a refusal, or ends in the first part of one."""
    return any(head in line for head in _HEADS) or bool(_CUT_HEAD.match(line[::-1]))


def _joined(pieces):
    """The text a refusal split into ``pieces`` was: each break joins with nothing (a cut inside a
    word) or one space (a wrap that dropped it), whichever gives the engine's exact text."""
    for spaces in itertools.product(("", " "), repeat=len(pieces) - 1):
        text = pieces[0] + "".join(space + piece for space, piece in zip(spaces, pieces[1:]))
        for kind, pattern in REFUSALS:
            match = pattern.search(text)
            if match and match.start() < len(pieces[0]):
                return kind, match, text
    return None


def _line_prefix(line):
    """What a log writer put before the refusal that begins on ``line`` (a timestamp, a ``[rank0]``
    tag; not the engine's own ``tensorfold:``), as a pattern for the start of the lines it goes on
    over, each run of digits standing for any (a later timestamp); None when there is none."""
    begins = [line.find(head) for head in _HEADS if head in line]
    if begins:
        end = min(begins)
    else:  # the line ends in the first part of a head (_may_continue)
        cut = _CUT_HEAD.match(line[::-1])
        end = len(line) - len(cut.group(0).rstrip()) if cut else 0
    prefix = line[:end].strip()
    if prefix.endswith("tensorfold:"):
        prefix = prefix[:-len("tensorfold:")].strip()
    if not prefix:
        return None
    return re.compile(r"^" + re.sub(r"[0-9]+", "[0-9]+", re.escape(prefix)) + r"\s*")


def _split_refusal(lines, first):
    """A refusal that begins on ``lines[first]`` and goes on over the next lines, passing over blank
    lines and lines that are clearly other output, at most LOOKAHEAD lines on. When the first line
    carries a prefix before the refusal (a timestamp, a rank's tag), the same prefix is taken off
    the lines it goes on over.

    Returns (kind, match, text, numbers of the lines joined) or None. The refusal must begin on
    the first line, and the search ends at the first joined text that holds one: lines after it,
    or unrelated to it, are never joined."""
    pieces, used, prefix = [lines[first].rstrip()], [], False
    for number in range(first + 1, min(len(lines), first + 1 + LOOKAHEAD)):
        piece = lines[number].strip()
        if not piece or _OTHER.search(piece):
            continue
        if prefix is False:  # worked out only for a line that may be joined: most candidates have none
            prefix = _line_prefix(pieces[0])
        if prefix is not None:
            piece = prefix.sub("", piece, count=1)
        if not piece or _OTHER.search(piece):
            continue
        pieces.append(piece)
        used.append(number)
        bare = "".join(pieces)
        for kind, loose in _LOOSE:
            match = loose.search(bare)
            if match and match.start() < len(pieces[0]):
                # The exact text when a join gives it, else the pieces as they are.
                return (_joined(pieces) or (kind, match, bare)) + (used,)
    return None


def find_refusals(text):
    """Every memory-fit refusal in a log: (line number, kind, match, the refusal's text).

    A refusal is on one line as the engine prints it, or split over a few (wrapped, or with
    another line such as NCCL's in between); terminal escapes are removed first."""
    lines = clean(text).split("\n")
    found, joined = [], set()
    for number, line in enumerate(lines):
        if number in joined:
            continue
        whole = [(kind, match) for kind, pattern in REFUSALS for match in pattern.finditer(line)]
        if whole:
            found += [(number, kind, match, line) for kind, match in whole]
        elif _may_continue(line.rstrip()):
            split = _split_refusal(lines, number)
            if split:
                found.append((number,) + split[:3])
                joined.update(split[3])  # a continuation begins nothing
    return found


def streams_needed(parallel):
    """Streams that must fit at the window: a numeric PARALLEL P is admitted only when P streams
    fit (with KV pages on or off, as the engine counts); ``auto`` needs one."""
    if isinstance(parallel, str) and parallel.strip().lower() == "auto":
        return 1
    value = int(parallel)
    if value < 1:
        raise ValueError("parallel must be auto or at least 1")
    return value


def parallel_problem(parallel):
    """Why a PARALLEL setting is not one the engine takes (a number of at least 1, or auto), or None."""
    value = str(parallel).strip().lower()
    if value == "auto" or (value.isdigit() and int(value) >= 1):
        return None
    return "parallel must be auto or a number of streams of at least 1, not %r" % parallel


def _answers(text, requested, streams, page_rows, named=True):
    """Each refusal's answer: (order, kind, context, reason, streams it is sized for). ``streams``
    must fit; a ``--parallel P needs`` refusal is sized for its P unless ``named`` is False."""
    answers = []
    for order, kind, match, line in find_refusals(text):
        context, sized_for = None, streams
        if kind == "no_stream":
            window = _int(match.group(1))
            one_stream_high = _printed_bounds(match.group(2))[1]
            budget_low = _printed_bounds(match.group(3))[0]
            context = largest_window(one_stream_high, window, budget_low, streams, requested, page_rows)
        elif kind == "parallel":
            asked = _int(match.group(1))
            all_streams_high = _printed_bounds(match.group(2))[1]
            window = _int(match.group(3))
            budget_low = _printed_bounds(match.group(4))[0]
            # The engine ran with the P it names (engine args may set it, not PARALLEL): size the
            # window for P streams, a stream's cost at the window being a P-th of what P need.
            sized_for = max(1, asked) if named else streams
            context = largest_window(all_streams_high / max(1, asked), window, budget_low, sized_for,
                                     requested, page_rows)
        elif kind == "window":
            context = min(_int(match.group(2)), requested)
            context -= context % page_rows
            context = context or None
        answers.append((order, kind, context, line.strip(), sized_for))
    return answers


def _choose(answers):
    """The refusal that decides: the weights (no window helps), else one with no answer, else the
    smallest answer (both ranks must fit)."""
    if not answers:
        return None
    weights = [a for a in answers if a[1] == "weights"]
    if weights:
        return weights[0]
    unanswerable = [a for a in answers if a[2] is None]
    if unanswerable:
        return unanswerable[0]
    return min(answers, key=lambda a: (a[2], a[0]))


def budget(reason):
    """The memory a refusal says is left for the streams, as printed (text), or None for a refusal
    that names none (the model's window, the weights): two refusals with other figures came from
    two ranks, or from memory that changed between the starts."""
    for pattern, group in ((NO_STREAM, 3), (PARALLEL, 4)):
        match = pattern.search(reason or "")
        if match:
            return match.group(group)
    return None


# The runner's first line of each start, in both rank logs (engine_args.RUNNER). Not anchored at
# a line's start: a rank killed mid-line leaves its last line unfinished, and a log written before
# the runner put its line on a line of its own has the next start's line run on from it.
_RUN_START = re.compile(r"runner: \S+ starting rank 1 and rank 0\b")


def latest_run(text):
    """The part of one rank log the last start wrote (terminal escapes removed, one line break
    per line, as :func:`analyse` reads it): the runner appends each start's lines to the same
    file, and an earlier start's refusal or startup line is not this one's."""
    text = clean(text)
    starts = list(_RUN_START.finditer(text))
    return text[starts[-1].start():] if starts else text


def analyse(text, requested_context, parallel="auto", kv_pages=True, page_rows=512):
    """Read a rank log (or both) and say whether the engine refused the window, and what fits.

    Returns a dict: ``refused`` (bool), ``kind`` (no_stream, parallel, weights, window or None),
    ``context`` (the largest window that fits, or None), ``reason`` (the refusal's line, or ""),
    ``streams`` and ``window`` (from the startup line, or None). When several refusals are in the
    text (both ranks' logs), the smallest answer wins: both ranks must fit. A ``--parallel P
    needs`` refusal is answered for the P it names.

    ``kv_pages`` does not change the answer: the engine counts streams the same way with shared
    pages (the memory left over one stream's cost at the window) and refuses a numeric
    ``--parallel P`` that does not fit either way. It is accepted so callers can pass it.
    """
    del kv_pages  # the engine's count does not depend on it (see above)
    requested = int(requested_context)
    page_rows = int(page_rows)
    if page_rows < 1:
        raise ValueError("page_rows must be at least 1")
    chosen = _choose(_answers(text, requested, streams_needed(parallel), page_rows))
    found_streams, found_window = parse_startup(text)
    result = {"refused": chosen is not None, "kind": None, "context": None, "reason": "",
              "streams": found_streams, "window": found_window}
    if chosen is not None:
        result.update(kind=chosen[1], context=chosen[2], reason=chosen[3])
    return result


def what_fits(text, requested_context, parallel="auto", page_rows=512):
    """What a refused start can be told: ``context`` (as :func:`analyse`), ``parallel`` (the
    --parallel it is sized for: the one a ``--parallel P needs`` refusal names, else the setting)
    and ``one_stream`` (the largest window a single stream fits, None when not one page does or
    the refusal gives no memory figures)."""
    requested, page_rows = int(requested_context), int(page_rows)
    streams = streams_needed(parallel)
    chosen = _choose(_answers(text, requested, streams, page_rows))
    if chosen is None:
        return {"context": None, "parallel": None, "one_stream": None}
    sized_for = str(chosen[4]) if chosen[1] == "parallel" else str(parallel).strip().lower()
    single = _choose(_answers(text, requested, 1, page_rows, named=False))
    one_stream = single[2] if single[1] in ("no_stream", "parallel") else None
    return {"context": chosen[2], "parallel": sized_for, "one_stream": one_stream}


def fit_key(fields):
    """The cache key: a SHA-256 of the fit's inputs (KEY_FIELDS), as ``name=value`` lines."""
    lines = []
    for name in KEY_FIELDS:
        value = fields.get(name, "")
        if isinstance(value, bool):
            value = "1" if value else "0"
        lines.append("%s=%s" % (name, value))
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def parse_cache(text):
    """Read the cache TSV into {key: context}; comments, blank and broken lines are skipped.
    A later line for the same key wins."""
    entries = {}
    for line in (text or "").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[1].strip().isdigit():
            continue
        entries[parts[0].strip()] = int(parts[1])
    return entries


def render_cache(entries, recorded=None):
    """Write {key: context} back as the cache TSV (sorted, with a header)."""
    recorded = recorded or {}
    lines = ["# glm53.tensorfold context-fit cache: key<TAB>context<TAB>recorded (UTC)"]
    for key in sorted(entries):
        lines.append("%s\t%d\t%s" % (key, entries[key], recorded.get(key, "")))
    return "\n".join(lines) + "\n"


def read_cache_file(path):
    if not path or not os.path.exists(path):
        return {}, {}
    with open(path) as handle:
        text = handle.read()
    recorded = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and not line.startswith("#"):
            recorded[parts[0].strip()] = parts[2].strip()
    return parse_cache(text), recorded


def write_cache_entry(path, key, context, now=None):
    """Record key -> context atomically. Returns True when the file changed."""
    entries, recorded = read_cache_file(path)
    if entries.get(key) == int(context):
        return False
    entries[key] = int(context)
    recorded[key] = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    import tempfile  # pylint: disable=import-outside-toplevel  # as fractions above
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=".context-fit.")
    with os.fdopen(handle, "w") as out:
        out.write(render_cache(entries, recorded))
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    return True
