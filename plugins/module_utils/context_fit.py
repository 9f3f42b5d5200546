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
import os
import re
import tempfile
import time
from fractions import Fraction

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_INT = r"([0-9][0-9,_]*)"

NO_STREAM = re.compile(
    r"the CUDA memory budget fits no stream: one at an? " + _INT + r"-token window takes "
    + _NUM + r" GiB, and " + _NUM + r" GiB is left after the model's " + _NUM
    + r" GiB and the " + _NUM + r" GiB reserve[^\n]*")
PARALLEL = re.compile(
    r"--parallel " + _INT + r" needs " + _NUM + r" GiB for its streams at an? " + _INT
    + r"-token window, and the CUDA memory budget leaves " + _NUM + r" GiB[^\n]*")
WEIGHTS = re.compile(
    r"the checkpoint's " + _NUM + r" GiB of weights do not fit the " + _NUM
    + r" GiB the CUDA memory budget grants[^\n]*")
WINDOW = re.compile(r"--context " + _INT + r" exceeds this model's " + _INT + r"-token window[^\n]*")
STARTUP = re.compile(
    r"CUDA [^\n]*?: model " + _NUM + r" GiB; " + _INT + r" streams? at once, " + _NUM
    + r" GiB each at an? " + _INT + r"-token window, of " + _NUM + r" GiB left[^\n]*")

# What the fit depends on, in the order the key is built from.
KEY_FIELDS = (
    "gpu_name", "gpu_memory_mib", "checkpoint_revision", "image_tag", "parallel", "kv",
    "kv_pages", "dense", "head", "vision", "drafter", "memory_reserve_gib",
)


def _int(text):
    return int(text.replace(",", "").replace("_", ""))


def _printed_bounds(text):
    """The interval a figure printed as ``text`` stands for: the engine rounds to the printed
    decimals, so the true value lies within half a unit of the last digit either side."""
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


def _line_start(text, match):
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start:] if end < 0 else text[start:end]


def parse_startup(text):
    """Return (streams, window) from the engine's last startup line, or (None, None)."""
    found = None
    for found in STARTUP.finditer(text or ""):
        pass
    if found is None:
        return None, None
    return _int(found.group(2)), _int(found.group(4))


def streams_needed(parallel):
    """Streams that must fit at the window: a numeric PARALLEL P is admitted only when P streams
    fit (with KV pages on or off, as the engine counts); ``auto`` needs one."""
    if isinstance(parallel, str) and parallel.strip().lower() == "auto":
        return 1
    value = int(parallel)
    if value < 1:
        raise ValueError("parallel must be auto or at least 1")
    return value


def analyse(text, requested_context, parallel="auto", kv_pages=True, page_rows=512):
    """Read a rank log (or both) and say whether the engine refused the window, and what fits.

    Returns a dict: ``refused`` (bool), ``kind`` (no_stream, parallel, weights, window or None),
    ``context`` (the largest window that fits, or None), ``reason`` (the refusal's line, or ""),
    ``streams`` and ``window`` (from the startup line, or None). When several refusals are in the
    text (both ranks' logs), the smallest answer wins: both ranks must fit.

    ``kv_pages`` does not change the answer: the engine counts streams the same way with shared
    pages (the memory left over one stream's cost at the window) and refuses a numeric
    ``--parallel P`` that does not fit either way. It is accepted so callers can pass it.
    """
    del kv_pages  # the engine's count does not depend on it (see above)
    text = text or ""
    requested = int(requested_context)
    page_rows = int(page_rows)
    if page_rows < 1:
        raise ValueError("page_rows must be at least 1")
    streams = streams_needed(parallel)

    refusals = []  # (order, kind, context, line)
    for match in NO_STREAM.finditer(text):
        window = _int(match.group(1))
        one_stream_high = _printed_bounds(match.group(2))[1]
        budget_low = _printed_bounds(match.group(3))[0]
        answer = largest_window(one_stream_high, window, budget_low, streams, requested, page_rows)
        refusals.append((match.start(), "no_stream", answer, _line_start(text, match)))
    for match in PARALLEL.finditer(text):
        asked = _int(match.group(1))
        all_streams_high = _printed_bounds(match.group(2))[1]
        window = _int(match.group(3))
        budget_low = _printed_bounds(match.group(4))[0]
        # A stream's cost at the window is a P-th of what P streams need.
        answer = largest_window(all_streams_high / asked, window, budget_low, streams, requested, page_rows)
        refusals.append((match.start(), "parallel", answer, _line_start(text, match)))
    for match in WEIGHTS.finditer(text):
        refusals.append((match.start(), "weights", None, _line_start(text, match)))
    for match in WINDOW.finditer(text):
        model_window = min(_int(match.group(2)), requested)
        model_window -= model_window % page_rows
        refusals.append((match.start(), "window", model_window or None, _line_start(text, match)))

    found_streams, found_window = parse_startup(text)
    result = {"refused": bool(refusals), "kind": None, "context": None, "reason": "",
              "streams": found_streams, "window": found_window}
    if not refusals:
        return result
    weights = [r for r in refusals if r[1] == "weights"]
    if weights:
        # No window helps when the weights alone do not fit.
        chosen = weights[0]
    else:
        unanswerable = [r for r in refusals if r[2] is None]
        if unanswerable:
            chosen = unanswerable[0]
        else:
            chosen = min(refusals, key=lambda r: (r[2], r[0]))
    result.update(kind=chosen[1], context=chosen[2], reason=chosen[3].strip())
    return result


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
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=".context-fit.")
    with os.fdopen(handle, "w") as out:
        out.write(render_cache(entries, recorded))
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    return True
