# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Pure parsers for what the collection asks nvidia-smi.

Nothing here runs a program: the modules run nvidia-smi and hand its text to these functions, so
the unit tests can feed them real recordings. Accepted shapes (all seen on real hosts):

- ``--query-gpu=FIELDS --format=csv`` with a header whose numeric columns carry units
  (``memory.total [MiB]``) and values with units (``143771 MiB``, ``700.00 W``), or
  ``--format=csv,noheader,nounits`` with bare values. Any bracketed value (``[N/A]``,
  ``[Not Supported]``, ``[Unknown Error]``, ``[GPU requires reset]``...) reads as None; parse_gpus
  keeps its text in the GPU's ``placeholders``.
- ``Unable to determine the device handle for GPU0000:41:00.0: Unknown Error`` among the rows (exit
  0, or 15 for a GPU fallen off the bus): a GPU the driver cannot reach; parse_gpu_answer returns it
  apart, the other rows still read.
- nvidia-smi's failures that are the driver's (not loaded, NVML library missing, library and kernel
  module of different versions): driver_failure tells them from a card's.
- ``--query-compute-apps=FIELDS`` the same way; an idle GPU prints the header alone (or nothing).
- ``topo -p2p r|w|n|a|p`` matrices: the header row wrapped in ANSI underline escapes, columns
  split by tabs or runs of spaces, an optional ``P2P Connectivity Matrix`` title, a legend.
- the CUDA version from ``nvidia-smi --version`` (``CUDA Version : 13.0``) or from the banner
  (``CUDA Version: 13.0``; 610-series drivers print ``CUDA UMD Version:``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# What gpu_info asks, in this order (the module passes these to --query-gpu).
# mig.mode.current, compute_mode and persistence_mode are last and may be absent from a row
# (OPTIONAL_GPU_FIELDS): answers to the older lists (the H200 recordings of gpu_info's query, ten
# and eleven fields) still read, the fields they lack None.
GPU_QUERY_FIELDS = (
    "index", "uuid", "name", "pci.bus_id", "memory.total", "memory.used", "memory.free",
    "compute_cap", "power.limit", "driver_version", "mig.mode.current", "compute_mode", "persistence_mode",
)
OPTIONAL_GPU_FIELDS = ("mig.mode.current", "compute_mode", "persistence_mode")
# parse_gpus' keys for the fields, and how each value reads (index is read apart: it must be there).
GPU_KEYS = (
    ("uuid", "uuid", "text"), ("name", "name", "text"), ("pci.bus_id", "pci_bus_id", "text"),
    ("memory.total", "memory_total_mib", "number"), ("memory.used", "memory_used_mib", "number"),
    ("memory.free", "memory_free_mib", "number"), ("compute_cap", "compute_cap", "text"),
    ("power.limit", "power_limit_w", "number"), ("driver_version", "driver_version", "text"),
    ("mig.mode.current", "mig_mode", "text"), ("compute_mode", "compute_mode", "text"),
    ("persistence_mode", "persistence_mode", "text"),
)
# What gpu_info asks about compute processes (--query-compute-apps).
APP_QUERY_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")

# Header names nvidia-smi prints for a field when they differ from the field's name.
HEADER_ALIASES = {
    "used_memory": ("used_gpu_memory",),
}

# Unbracketed values that mean "no value" in nvidia-smi's CSV output; any bracketed value does too
# (NVML's error texts are many and grow with drivers: [Unknown Error], [GPU requires reset]...).
MISSING_VALUES = frozenset(("", "n/a", "not supported"))

# Placeholders that say the GPU itself is out of order, not only that one value is unknown.
GPU_FAULTS = (("requires reset", "reset"), ("gpu is lost", "lost"), ("gpu lost", "lost"))

# P2P statuses nvidia-smi's legend defines (X is a GPU with itself).
P2P_STATUSES = {
    "X": "Self",
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "U": "Unknown",
    "DR": "Disabled by regkey",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_UNIT_IN_HEADER = re.compile(r"\s*\[[^\]]*\]\s*$")
_VALUE_WITH_UNIT = re.compile(r"^([-+]?[0-9]+(?:\.[0-9]+)?)\s*(MiB|GiB|KiB|W|%|MHz|C)?$")
# Memory read in another unit than MiB is brought to MiB (the parsers' keys say _mib).
_TO_MIB = {"GiB": 1024, "KiB": 1.0 / 1024}
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_CUDA_VERSION = re.compile(r"CUDA(?:\s+UMD)?\s+Version\s*:\s*([0-9]+(?:\.[0-9]+)*)", re.IGNORECASE)
# A GPU the driver cannot reach: nvidia-smi prints this on stdout among the good rows (exit 0, or
# 15 "GPU has fallen off the bus" and the like: read_gpu_info reads the rows either way).
_DEVICE_ERROR = re.compile(
    r"^\s*Unable to (?:determine|get) the device handle for (?:GPU\s*)?"
    r"([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*:?\s*(.*?)\s*$", re.IGNORECASE)
_DRIVER_VERSION = re.compile(
    r"(?:DRIVER\s+version|Driver\s+Version|KMD\s+Version)\s*:\s*([0-9]+(?:\.[0-9]+)*)", re.IGNORECASE)


class NvidiaSmiParseError(ValueError):
    """nvidia-smi printed something these parsers do not understand."""


def strip_ansi(text):
    """Remove terminal escapes (nvidia-smi underlines the topo header row)."""
    return _ANSI.sub("", text)


def is_missing(value):
    """True for the placeholders nvidia-smi prints instead of a value (any ``[...]``)."""
    if value is None:
        return True
    value = value.strip()
    return value.lower() in MISSING_VALUES or (value.startswith("[") and value.endswith("]"))


def to_number(value):
    """``"143771 MiB"`` -> 143771, ``"700.00 W"`` -> 700.0, ``"[N/A]"`` -> None; memory in GiB or
    KiB comes back in MiB (``"95.5 GiB"`` -> 97792).

    Integers stay int; anything with a decimal point becomes float. Raises NvidiaSmiParseError
    for text that is neither a number nor a placeholder.
    """
    if is_missing(value):
        return None
    match = _VALUE_WITH_UNIT.match(value.strip())
    if not match:
        raise NvidiaSmiParseError("not a number: %r" % value)
    number, unit = match.group(1), match.group(2)
    value = float(number) if "." in number else int(number)
    if unit in _TO_MIB:
        value = value * _TO_MIB[unit]
        value = int(value) if float(value).is_integer() else value
    return value


def to_text(value):
    """A text value, or None for nvidia-smi's placeholders."""
    return None if is_missing(value) else value.strip()


def _header_name(cell):
    return _UNIT_IN_HEADER.sub("", cell).strip().lower()


def _is_header(cells, fields):
    if len(cells) != len(fields):
        return False
    for cell, field in zip(cells, fields):
        name = _header_name(cell)
        if name != field and name not in HEADER_ALIASES.get(field, ()):
            return False
    return True


def parse_csv(text, fields, free_text_field=None, optional_tail=0):
    """Rows of a ``--format=csv`` answer as dicts keyed by ``fields`` (values still text).

    The header line, when present, must name ``fields`` in order (units in brackets and the
    aliases nvidia-smi uses are allowed). ``free_text_field`` names a column that may itself hold
    commas (a process name): only the columns around it are split off, so it keeps its own text.
    The last ``optional_tail`` fields may be missing from the whole answer (header and every row
    alike), as in an answer to the list without them.
    """
    rows = []
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    widths = set(len(line.split(",")) for line in lines)
    if optional_tail and len(widths) == 1 and len(fields) - optional_tail <= min(widths) < len(fields):
        fields = fields[:min(widths)]  # an answer to the shorter list: the missing fields read None
    for number, line in enumerate(lines):
        cells = [cell.strip() for cell in line.split(",")]
        if number == 0 and _is_header(cells, fields):
            continue
        if len(cells) > len(fields) and free_text_field in fields:
            at = fields.index(free_text_field)
            before = line.split(",", at)
            middle_and_after = before.pop().rsplit(",", len(fields) - at - 1)
            cells = [cell.strip() for cell in before + middle_and_after]
        if len(cells) != len(fields):
            raise NvidiaSmiParseError(
                "expected %d comma-separated values, got %d in %r" % (len(fields), len(cells), line))
        rows.append(dict(zip(fields, cells)))
    return rows


def split_device_errors(text):
    """``(text without them, [{pci_bus_id, error}])``: the lines where nvidia-smi says it cannot
    reach a GPU (``Unable to determine the device handle for GPU0000:41:00.0: Unknown Error``)."""
    kept, unreachable = [], []
    for line in strip_ansi(text or "").splitlines():
        match = _DEVICE_ERROR.match(line)
        if match:
            unreachable.append({"pci_bus_id": match.group(1), "error": match.group(2).rstrip(".") or "no reason given"})
        else:
            kept.append(line)
    return "\n".join(kept), unreachable


def parse_gpu_answer(text, fields=GPU_QUERY_FIELDS):
    """The ``--query-gpu`` answer as ``{gpus, unreachable}``: parse_gpus' dicts, and the GPUs
    nvidia-smi printed an error line for instead of a row (split_device_errors)."""
    text, unreachable = split_device_errors(text)
    gpus = []
    optional = 0
    while optional < len(fields) and fields[len(fields) - 1 - optional] in OPTIONAL_GPU_FIELDS:
        optional += 1
    for row in parse_csv(text, fields, optional_tail=optional):
        index = to_number(row["index"])
        if not isinstance(index, int):
            raise NvidiaSmiParseError("GPU index is not a whole number: %r" % row["index"])
        gpu = {"index": index}
        placeholders = {}
        for field, key, kind in GPU_KEYS:
            raw = row.get(field)
            gpu[key] = to_number(raw) if kind == "number" else to_text(raw)
            if raw is not None and is_missing(raw) and raw.strip():
                placeholders[field] = raw.strip()
        gpu["placeholders"] = placeholders
        gpus.append(gpu)
    return {"gpus": gpus, "unreachable": unreachable}


def parse_gpus(text, fields=GPU_QUERY_FIELDS):
    """The ``--query-gpu`` answer (with or without header/units) as gpu_info's dicts.

    Each dict has index, uuid, name, pci_bus_id, memory_total_mib, memory_used_mib,
    memory_free_mib, compute_cap (text such as ``"12.0"``), power_limit_w, driver_version,
    mig_mode (``Enabled``/``Disabled``), compute_mode (``Default``, ``Exclusive_Process`` or
    ``Prohibited``) and persistence_mode (``Enabled``/``Disabled``); a value nvidia-smi does not report (or a field not in
    ``fields``) is None. ``placeholders`` maps each field nvidia-smi printed a placeholder for to
    that text (``{"memory.used": "[Unknown Error]"}``), so a check can say why it cannot judge.
    """
    return parse_gpu_answer(text, fields)["gpus"]


def gpu_fault(gpu):
    """``("reset" | "lost", placeholder)`` when a GPU's placeholders say it needs a reset or is
    lost, else None."""
    for text in sorted((gpu.get("placeholders") or {}).values()):
        for words, fault in GPU_FAULTS:
            if words in text.lower():
                return fault, text
    return None


def parse_compute_apps(text, fields=APP_QUERY_FIELDS):
    """The ``--query-compute-apps`` answer as ``{gpu_uuid, pid, name, used_memory_mib}`` dicts.

    An idle host prints the header alone (or nothing): that is an empty list. A line for a GPU the
    driver cannot reach is left out (parse_gpu_answer reports that GPU).
    """
    apps = []
    for row in parse_csv(split_device_errors(text)[0], fields, free_text_field="process_name"):
        apps.append({
            "gpu_uuid": to_text(row.get("gpu_uuid")),
            "pid": to_number(row.get("pid")),
            "name": to_text(row.get("process_name")),
            "used_memory_mib": to_number(row.get("used_memory")),
        })
    return apps


def attach_processes(gpus, apps):
    """Each GPU dict gets ``processes``: the apps running on it (matched by UUID)."""
    for gpu in gpus:
        gpu["processes"] = [
            {"pid": app["pid"], "name": app["name"], "used_memory_mib": app["used_memory_mib"]}
            for app in apps if app["gpu_uuid"] == gpu["uuid"]
        ]
    return gpus


def select_gpus(gpus, indices):
    """The GPUs with the given indices, in the order asked; raises KeyError naming a missing one."""
    if not indices:
        return list(gpus)
    by_index = dict((gpu["index"], gpu) for gpu in gpus)
    missing = [index for index in indices if index not in by_index]
    if missing:
        raise KeyError(missing)
    return [by_index[index] for index in indices]


def parse_p2p_matrix(text):
    """A ``topo -p2p`` matrix as ``{(row_gpu, column_gpu): status}`` for every pair of GPUs.

    The diagonal (``X``) is left out. Statuses are returned as printed (``OK``, ``CNS``, ...).
    Raises NvidiaSmiParseError when no matrix header is found or a row does not fit it.
    """
    return parse_p2p_table(text)[1]


def parse_p2p_table(text):
    """``(gpu_indices, matrix)``: the GPUs the matrix header lists, and parse_p2p_matrix's dict."""
    columns = None
    matrix = {}
    for raw in strip_ansi(text).splitlines():
        tokens = raw.split()
        if not tokens:
            if columns is not None and matrix:
                break  # the blank line before the legend
            continue
        if tokens[0].rstrip(":").lower() == "legend":
            break
        if columns is None:
            labels = [_GPU_LABEL.match(token) for token in tokens]
            if all(labels):
                columns = [int(label.group(1)) for label in labels]
            continue  # a title line such as "P2P Connectivity Matrix", or the header
        row_label = _GPU_LABEL.match(tokens[0])
        if not row_label:
            continue
        statuses = tokens[1:]
        if len(statuses) != len(columns):
            raise NvidiaSmiParseError("matrix row %r has %d columns, the header %d"
                                      % (raw.strip(), len(statuses), len(columns)))
        row = int(row_label.group(1))
        for column, status in zip(columns, statuses):
            if column != row:
                matrix[(row, column)] = status.upper()
    if columns is None:
        raise NvidiaSmiParseError("no GPU matrix header found in nvidia-smi topo output")
    return columns, matrix


def parse_legend(text):
    """The matrix legend as ``{status: meaning}`` (``DR = Disabled by regkey`` on newer drivers)."""
    legend = {}
    seen = False
    for line in strip_ansi(text).splitlines():
        if line.strip().lower().startswith("legend"):
            seen = True
            continue
        if seen and "=" in line:
            key, meaning = line.split("=", 1)
            legend[key.strip()] = meaning.strip()
    return legend


def pair_statuses(matrix, indices):
    """``{"i-j": status}`` for every ordered pair of the selected GPUs, in rank order.

    A pair the matrix does not list (a GPU nvidia-smi did not print) reads ``U`` (unknown).
    """
    pairs = {}
    for i in indices:
        for j in indices:
            if i != j:
                pairs["%d-%d" % (i, j)] = matrix.get((i, j), "U")
    return pairs


def p2p_problems(read, write, legend=None):
    """The pairs whose read or write status is not OK, as short texts, one per ordered pair."""
    meanings = dict(P2P_STATUSES)
    meanings.update(legend or {})
    texts = []
    for pair in sorted(set(read) | set(write), key=lambda p: tuple(int(x) for x in p.split("-"))):
        r, w = read.get(pair, "U"), write.get(pair, "U")
        if r == "OK" and w == "OK":
            continue
        first, second = pair.split("-")
        texts.append("GPU %s -> GPU %s: read %s (%s), write %s (%s)" % (
            first, second, r, meanings.get(r, "unknown status"), w, meanings.get(w, "unknown status")))
    return texts


def p2p_finding(read, write, legend=None):
    """W_P2P's ``(what, what to do)`` naming every pair without peer-to-peer, or None when all are
    OK. What to do is None (the code's own advice: IOMMU/ACS, BIOS) unless every failing status is
    GNS: then the cards themselves lack peer-to-peer (consumer cards), and no host setting helps."""
    texts = p2p_problems(read, write, legend)
    if not texts:
        return None
    if (set(read.values()) | set(write.values())) - set(("OK",)) == set(("GNS",)):
        return ("these cards do not support peer-to-peer (GNS: GPU not supported): %s" % "; ".join(texts),
                "NCCL still works over host memory, but more slowly; no host setting turns it on for these cards.")
    return "NVML reports no peer-to-peer between the cards (IOMMU/ACS, BIOS): %s" % "; ".join(texts), None


def p2p_warning(read, write, legend=None):
    """The ``W_P2P`` text naming every pair without peer-to-peer, or None when all are OK."""
    finding = p2p_finding(read, write, legend)
    if finding is None:
        return None
    return "[W_P2P] %s. %s" % (finding[0], finding[1] or "NCCL still works over host memory, but more slowly.")


def parse_cuda_version(text):
    """The CUDA version from ``nvidia-smi --version`` or the banner, or None when absent."""
    match = _CUDA_VERSION.search(text or "")
    return match.group(1) if match else None


def parse_driver_version(text):
    """The driver version from ``nvidia-smi --version`` or the banner, or None when absent."""
    match = _DRIVER_VERSION.search(text or "")
    return match.group(1) if match else None


def version_tuple(version):
    """``"580.159.04"`` -> ``(580, 159, 4)``; None or junk -> ``()``."""
    parts = []
    for part in str(version or "").strip().split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def version_at_least(version, minimum):
    """True when ``version`` (a dotted string) is at least ``minimum``; unknown is False."""
    have = version_tuple(version)
    return bool(have) and have >= version_tuple(minimum)


# nvidia-smi's failures that are the driver's, not a card's: (exit status, words it prints, what
# that means, what to do). Exit statuses from nvidia-smi's manual; either the status or the words
# is enough (a wrapper may change the status).
DRIVER_FAILURES = (
    (9, "couldn't communicate with the nvidia driver", "the NVIDIA driver is not loaded",
     "Load it (modprobe nvidia) or install the driver for the running kernel (DKMS builds it for each kernel), "
     "then run again."),
    (12, "libnvidia-ml.so", "nvidia-smi cannot find the driver's NVML library (libnvidia-ml.so.1)",
     "Install the driver's utilities and libraries of the loaded driver's version, then run again."),
    (18, "driver/library version mismatch",
     "the driver's libraries and the loaded kernel module are of different versions (a driver upgrade "
     "without a reboot)", "Reboot the host so that the upgraded driver's kernel module loads, then run again."),
)


def kernel_module_flavour(text):
    """Which of NVIDIA's two kernel module flavours ``/proc/driver/nvidia/version`` names: ``"open"``
    (``NVIDIA UNIX Open Kernel Module for x86_64``) or ``"proprietary"`` (``NVIDIA UNIX x86_64 Kernel
    Module``); None without an ``NVRM version:`` line. NVIDIA drives Blackwell cards only with the
    open flavour: the proprietary one loads, but takes no Blackwell card (nvidia-smi: No devices were found)."""
    for line in (text or "").splitlines():
        if line.startswith("NVRM version:"):
            return "open" if "open kernel module" in line.lower() else "proprietary"
    return None


def driver_failure(rc, out, err):
    """``(what, todo)`` when a failed nvidia-smi call says the driver itself cannot be used (not
    loaded, its library missing, library and kernel module of different versions), else None."""
    said = " ".join(("%s %s" % (err or "", out or "")).split()).lower()
    for status, words, what, todo in DRIVER_FAILURES:
        if rc == status or words in said:
            return what, todo
    return None


def command_failure(args, rc, out, err):
    """A one-line account of a failed nvidia-smi call: the command, its exit status, its words."""
    said = " ".join((err or "").split()) or " ".join((out or "").split()) or "no output"
    hint = ""
    known = driver_failure(rc, out, err)
    if known:
        hint = " (exit %s: %s)" % (rc, known[0])
    elif rc == 6:
        selected = any(arg in ("-i", "--id") or arg.startswith("--id=") for arg in args)
        hint = " (exit 6: %s)" % ("no GPU matched the selection" if selected else "the driver sees no GPU")
    return "%s failed with exit status %s%s: %s" % (" ".join(args), rc, hint, said)
