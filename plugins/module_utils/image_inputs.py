# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The engine image's inputs: the patch series checks and the content-hash tag.

Pure functions, no Ansible imports, so the unit tests drive them directly.

A patch series is a list of entries ``{"name": "0001-x.patch", "sha256": "...", "source": "recipe"}``
in the order the patches are applied: the recipe's series first, then the site patches.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem, record

PATCH_NAME_RE = re.compile(r"^([0-9]{4})-.+\.patch$")

# How long the tag is: 16 hex digits (64 bits) of the sha256.
TAG_LENGTH = 16


HEX40_RE = re.compile(r"^[0-9a-f]{40}$")
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")


def settings_problems(values, host, is_directory):
    """The image settings' problems as E_SETTINGS records (none when the settings can build the
    image). ``values``: the tensorfold_image_* settings, defaults included; ``is_directory``: a
    test for a folder on the controller, where the patch series is read."""
    def text(name):
        value = values.get(name)
        return "" if value is None else str(value)

    series_dir, site_dir = text("tensorfold_image_patch_series_dir"), text("tensorfold_image_site_patches_dir")
    checks = (
        ("tensorfold_image_engine_commit", not HEX40_RE.match(text("tensorfold_image_engine_commit")),
         "tensorfold_image_engine_commit must be the full 40-hex TensorFold commit to build (the recipe's starts "
         "f350cd3e; `git rev-parse f350cd3e` in a TensorFold clone gives it), not \"%s\"" % text("tensorfold_image_engine_commit")),
        ("tensorfold_image_zig_sha256", not HEX64_RE.match(text("tensorfold_image_zig_sha256")),
         "tensorfold_image_zig_sha256 must be the Zig tarball's 64-hex sha256, not \"%s\"" % text("tensorfold_image_zig_sha256")),
        ("tensorfold_image_patch_series_repo",
         not series_dir and (not text("tensorfold_image_patch_series_repo")
                             or not HEX40_RE.match(text("tensorfold_image_patch_series_commit"))),
         "the recipe's patch series has no source: set tensorfold_image_patch_series_repo with a full 40-hex "
         "tensorfold_image_patch_series_commit, or tensorfold_image_patch_series_dir to a folder on the controller"),
        ("tensorfold_image_patch_series_dir", bool(series_dir) and not is_directory(series_dir),
         "tensorfold_image_patch_series_dir %s is not a folder on the controller" % series_dir),
        ("tensorfold_image_site_patches_dir", bool(site_dir) and not is_directory(site_dir),
         "tensorfold_image_site_patches_dir %s is not a folder on the controller (an empty folder, or \"\", means no "
         "site patches)" % site_dir),
        ("tensorfold_image_registry", text("tensorfold_image_build_strategy") == "registry" and not text("tensorfold_image_registry"),
         "tensorfold_image_build_strategy is registry but tensorfold_image_registry is empty"),
        ("tensorfold_image_move_port", not _is_port(values.get("tensorfold_image_move_port")),
         "tensorfold_image_move_port must be a TCP port (1-65535), not \"%s\"" % text("tensorfold_image_move_port")),
    )
    return [record("E_SETTINGS", host, what, setting=name) for name, bad, what in checks if bad]


def _is_port(value):
    try:
        return 1 <= int(str(value).strip()) <= 65535
    except ValueError:
        return False


def patch_number(name):
    """The patch's four-digit number as an int, or None when the name does not follow NNNN-name.patch."""
    match = PATCH_NAME_RE.match(name)
    return int(match.group(1)) if match else None


def order_source(names):
    """One source's patch names in application order: by number (then by name, for a stable order)."""
    return sorted(names, key=lambda n: (patch_number(n) if patch_number(n) is not None else -1, n))


def series_problems(entries, expected_count=None):
    """Every problem with a series, as (what is wrong) strings; an empty list means it may be built.

    Checks: names match ``^[0-9]{4}-.+\\.patch$``; no number appears twice; the recipe's series has
    ``expected_count`` patches when one is given; the whole series is in ascending number order
    (site patches come after the recipe's, so they must be numbered above its last patch).
    """
    problems = []
    seen = {}
    previous = None
    recipe_count = 0
    for entry in entries:
        name = entry["name"]
        source = entry.get("source", "recipe")
        if source == "recipe":
            recipe_count += 1
        number = patch_number(name)
        if number is None:
            problems.append("patch %s (%s) is not named NNNN-name.patch" % (name, source))
            continue
        if number in seen:
            problems.append("patch %s (%s) has the same number as %s" % (name, source, seen[number]))
        else:
            seen[number] = name
        if previous is not None and number < previous[0]:
            problems.append("patch %s (%s) is numbered below %s, which is applied before it" % (name, source, previous[1]))
        previous = (number, name)
    if expected_count is not None and recipe_count != int(expected_count):
        problems.append("the recipe's patch series has %d patches, %d expected" % (recipe_count, int(expected_count)))
    return problems


def series_hash(entries):
    """sha256 over the series: each patch's name and the sha256 of its bytes, in order."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(("%s %s\n" % (entry["name"], entry["sha256"])).encode("utf-8"))
    return digest.hexdigest()


def image_tag(dockerfile_text, entries, pins, length=TAG_LENGTH):
    """The image's content-hash tag.

    A short sha256 over exactly three things: the rendered Dockerfile text, every patch's bytes
    in order (through each patch's name and sha256), and the pins (engine commit, Zig version and
    checksum, base images, build arguments) as a dict. Nothing else goes in, so editing docs,
    inventories or other roles never changes it.
    """
    canonical = json.dumps(
        {
            "dockerfile": dockerfile_text,
            "patches": [[entry["name"], entry["sha256"]] for entry in entries],
            "pins": pins,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:length]


def inputs(entries, host, dockerfile_text, pins, expected_count=None):
    """Everything the image is built from, judged and hashed once: ``problems`` (E_PATCHES records
    from ``series_problems``), ``series_hash``, ``build_args`` (the pins plus PATCH_SERIES_SHA256,
    what the Dockerfile's build arguments receive) and ``tag`` (``image_tag`` over all of it)."""
    digest = series_hash(entries)
    build_args = dict(pins, PATCH_SERIES_SHA256=digest)
    return {
        "problems": [record("E_PATCHES", host, what) for what in series_problems(entries, expected_count)],
        "series_hash": digest,
        "build_args": build_args,
        "tag": image_tag(dockerfile_text, entries, build_args),
    }


def is_patch_candidate(name):
    """Whether a file of a patch folder is one of its patches (not a dotfile, a README or the
    ``series`` file that orders them)."""
    return not (name.startswith(".") or name.startswith("README") or name == "series")


def patch_names(folder):
    """The names of the patch files in ``folder`` (on the controller), in no particular order."""
    return [name for name in os.listdir(folder) if is_patch_candidate(name) and os.path.isfile(os.path.join(folder, name))]


def folder_patches(folder):
    """{name: sha256} of the patch files in ``folder``, as the patch_series lookup reads them; None
    when it is no folder (the image's check reports that)."""
    if not os.path.isdir(folder):
        return None
    found = {}
    for name in patch_names(folder):
        with open(os.path.join(folder, name), "rb") as handle:
            found[name] = hashlib.sha256(handle.read()).hexdigest()
    return found


def file_entry(name, data, source, path=None):
    """A series entry for one patch file's bytes."""
    entry = {"name": name, "sha256": hashlib.sha256(data).hexdigest(), "source": source}
    if path is not None:
        entry["path"] = path
    return entry


# A coded line the Dockerfile's own RUN steps print, as BuildKit's plain progress shows it:
# "#12 0.256 [E_PATCHES] ..." in the step log, "0.256 [E_PATCHES] ..." in the error summary.
# Step headers ("#12 [builder 8/10] RUN ... echo "[E_PATCHES] ...") echo the command text and
# must not count, even though they contain the same words.
_BUILD_OUTPUT_CODE_RE = re.compile(r"^(?:#\d+ )?\d+(?:\.\d+)? \[(E_[A-Z_]+)\] (.*?)\s*$", re.MULTILINE)
_PATCH_RE = re.compile(r"^patch (\S+) does not apply.*?( \(its lines end in CRLF[^)]*\))?$")
# What a host without the buildx plugin says: community.docker's docker_image_build ("Docker CLI
# /usr/bin/docker does not have the buildx plugin installed"), the docker CLI run with an unknown
# subcommand ("docker: 'buildx' is not a docker command." / "unknown command: docker buildx") and
# Docker 23+'s CLI with DOCKER_BUILDKIT=1 ("BuildKit is enabled but the buildx component is missing").
_NO_BUILDX_RE = re.compile(r"does not have the buildx plugin|'buildx' is not a docker command|unknown command: docker buildx"
                           r"|buildx component is missing")
# A step, or the daemon writing a layer, that found the disk full (ENOSPC's text, as the kernel's
# strerror and Go's syscall error both give it). The line that says so is the cause.
_NO_SPACE_RE = re.compile(r"^.*no space left on device.*$", re.IGNORECASE | re.MULTILINE)
NO_SPACE_TODO = ("Free space on the filesystem of Docker's data root (docker system df shows what uses it; docker builder "
                 "prune drops BuildKit's cache), then run again.")
NO_BUILDX_TODO = ("Install Docker's buildx plugin on the host (docker-buildx-plugin from Docker's apt repository, "
                  "docker-buildx on Debian trixie and Ubuntu; `docker buildx version` must answer), then run again.")


def build_failure(log, engine_commit=""):
    """What a failed image build reports: ``{"code", "what", "patch"}`` from BuildKit's output.

    The first coded line a RUN step printed wins (E_PATCHES names the patch that does not apply,
    E_IMAGE what went wrong); without one, a full disk is E_DISK and a host without the buildx
    plugin E_DOCKER (both with a ``todo``), and otherwise the build's last ``ERROR`` line (or, without one, its last line) is
    reported as E_IMAGE.
    """
    for match in _BUILD_OUTPUT_CODE_RE.finditer(log or ""):
        code, text = match.group(1), match.group(2)
        patch = _PATCH_RE.match(text)
        if code == "E_PATCHES" and patch:
            return {
                "code": code,
                "patch": patch.group(1),
                "what": "patch %s does not apply cleanly on TensorFold %s after the patches before it%s"
                % (patch.group(1), engine_commit[:12] or "the pinned commit", patch.group(2) or ""),
            }
        return {"code": code, "patch": "", "what": text}
    full = _NO_SPACE_RE.search(log or "")
    if full:
        return {"code": "E_DISK", "patch": "", "todo": NO_SPACE_TODO,
                "what": "the image build ran out of disk space: %s" % _short(full.group(0), 300)}
    step = failed_step(log)
    if step:
        return {"code": "E_IMAGE", "patch": "", "what": "the image build failed: %s" % step}
    lines = [line.strip() for line in (log or "").splitlines() if line.strip()]
    no_buildx = [line for line in lines if _NO_BUILDX_RE.search(line)]
    if no_buildx:
        return {"code": "E_DOCKER", "patch": "", "todo": NO_BUILDX_TODO,
                "what": "Docker on this host has no buildx plugin, which the image build needs (BuildKit): %s"
                % no_buildx[0][:300]}
    errors = [line for line in lines if "ERROR" in line]
    # No ERROR line (the build never started, e.g. buildx missing): the last thing said.
    last = errors[-1] if errors else (lines[-1] if lines else "no output")
    return {"code": "E_IMAGE", "patch": "", "what": "the image build failed: %s" % last[:600]}


# BuildKit's plain progress: "#12 [builder  8/10] RUN zig build ..." opens step 12, "#12 3.021 text"
# is a line the step printed, and "#12 ERROR: ... exit code: 1" ends a failed step (BuildKit 0.8's
# "executor failed running [...]", later "process \"...\" did not complete successfully").
_STEP_ERROR_RE = re.compile(r"^#(\d+) ERROR: (.*)$", re.MULTILINE)
_EXIT_CODE_RE = re.compile(r"exit code: (\d+)")
_CAUSE_RE = re.compile(r"error|fatal|failed|cannot|not found|no such|denied|killed", re.IGNORECASE)
STEP_LINES = 5


def _short(text, limit):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def failed_step(log):
    """The failed step of BuildKit's plain output, short: ``step [builder 8/10] RUN zig build... failed
    with exit code 1; its last lines: ...`` - the lines it printed that look like a cause (else its
    last lines), at most STEP_LINES of them. None when the output names no failed step."""
    errors = list(_STEP_ERROR_RE.finditer(log or ""))
    if not errors:
        return None
    number, error = errors[-1].group(1), errors[-1].group(2)
    title = re.search(r"^#%s \[([^\]]+)\] (.*)$" % number, log, re.MULTILINE)
    printed = [match.group(1) for match in re.finditer(r"^#%s \d+(?:\.\d+)? (.*)$" % number, log, re.MULTILINE)
               if match.group(1).strip()]
    causes = [line for line in printed if _CAUSE_RE.search(line)] or printed
    code = _EXIT_CODE_RE.search(error)
    text = "step [%s] %s failed" % (" ".join(title.group(1).split()), _short(title.group(2), 70)) if title else "a step failed"
    text += " with exit code %s" % code.group(1) if code else ": %s" % _short(error, 200)
    if causes:
        text += "; its last lines: %s" % " | ".join(_short(line, 200) for line in causes[-STEP_LINES:])
    return text


# A failed build's stdout and stderr are kept to their last lines in the task's result (Ansible
# prints a failed task's whole result): the coded message already holds the cause.
LOG_TAIL_LINES = 40


def log_tail(text, lines=LOG_TAIL_LINES):
    """The last ``lines`` lines of a build log, with a first line saying how many were left out."""
    kept = (text or "").splitlines()
    if len(kept) <= lines:
        return text
    return "(%d earlier lines left out)\n%s" % (len(kept) - lines, "\n".join(kept[-lines:]))


def build_problem(result, host, engine_commit=""):
    """The coded message of a failed build, from the build module's failed result (its ``msg``,
    ``stderr`` and ``stdout``: BuildKit's output lands in one of them)."""
    log = "\n".join(str(result.get(key) or "") for key in ("msg", "stderr", "stdout"))
    failure = build_failure(log, engine_commit)
    return problem(failure["code"], host, failure["what"], failure.get("todo"))
