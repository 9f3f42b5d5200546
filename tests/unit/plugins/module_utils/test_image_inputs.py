# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import (
    build_failure,
    build_problem,
    file_entry,
    image_tag,
    inputs,
    log_tail,
    order_source,
    patch_number,
    series_hash,
    series_problems,
)

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..", "..", "..")
TEMPLATE = os.path.join(ROOT, "templates", "Dockerfile.j2")
STANDIN_PATCHES = os.path.join(HERE, "fixtures", "patch_series")  # copies of the source stand-in's series

PINS = {
    "TENSORFOLD_COMMIT": "a" * 40,
    "ZIG_VERSION": "0.17.0",
    "ZIG_SHA256": "1cbe9df9f27e6b78d14ccbca43b6703a404ef79ef1c463de901d7f088d4e2026",
    "BUILDER_IMAGE": "nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:" + "7" * 64,
}


def entries(*names, **kwargs):
    source = kwargs.get("source", "recipe")
    return [file_entry(n, n.encode("utf-8"), source) for n in names]


def read_series():
    names = order_source(os.listdir(STANDIN_PATCHES))
    result = []
    for name in names:
        with open(os.path.join(STANDIN_PATCHES, name), "rb") as handle:
            result.append(file_entry(name, handle.read(), "recipe"))
    return result


def dockerfile():
    with open(TEMPLATE) as handle:
        return handle.read()


def test_patch_numbers_follow_the_naming_rule():
    assert patch_number("0001-glm-exl3-prompt-experts.patch") == 1
    assert patch_number("0093-x.patch") == 93
    assert patch_number("93-x.patch") is None
    assert patch_number("0001-x.diff") is None
    assert patch_number("0001-.patch") is None


def test_a_source_is_ordered_by_number_not_by_listing():
    assert order_source(["0010-b.patch", "0002-a.patch", "0001-c.patch"]) == [
        "0001-c.patch", "0002-a.patch", "0010-b.patch"]


def test_a_clean_series_has_no_problems():
    series = entries("0001-a.patch", "0002-b.patch", "0003-c.patch") + entries("0100-site.patch", source="site")
    assert series_problems(series, expected_count=3) == []


def test_a_misnamed_patch_is_named():
    problems = series_problems(entries("0001-a.patch", "fix.diff"))
    assert len(problems) == 1 and "fix.diff" in problems[0] and "NNNN-name.patch" in problems[0]


def test_a_duplicate_number_names_both_patches():
    problems = series_problems(entries("0001-a.patch", "0002-b.patch") + entries("0002-site.patch", source="site"))
    assert any("0002-site.patch" in p and "0002-b.patch" in p for p in problems)


def test_the_recipe_count_is_enforced_only_on_the_recipe_series():
    series = entries("0001-a.patch", "0002-b.patch") + entries("0100-site.patch", source="site")
    assert series_problems(series, expected_count=2) == []
    problems = series_problems(series, expected_count=93)
    assert problems == ["the recipe's patch series has 2 patches, 93 expected"]


def test_a_site_patch_numbered_inside_the_series_is_out_of_order():
    series = entries("0001-a.patch", "0093-z.patch") + entries("0050-site.patch", source="site")
    problems = series_problems(series)
    assert len(problems) == 1 and "0050-site.patch" in problems[0] and "0093-z.patch" in problems[0]


def test_tag_is_short_hex_and_stable():
    tag = image_tag(dockerfile(), read_series(), PINS)
    assert len(tag) == 16 and int(tag, 16) >= 0
    assert image_tag(dockerfile(), read_series(), dict(PINS)) == tag


def test_editing_a_patch_changes_the_tag():
    series = read_series()
    before = image_tag(dockerfile(), series, PINS)
    edited = list(series)
    edited[1] = file_entry(edited[1]["name"], b"edited bytes", "recipe")
    assert image_tag(dockerfile(), edited, PINS) != before


def test_reordering_renaming_or_dropping_a_patch_changes_the_tag():
    series = read_series()
    before = image_tag(dockerfile(), series, PINS)
    assert image_tag(dockerfile(), list(reversed(series)), PINS) != before
    assert image_tag(dockerfile(), series[:-1], PINS) != before
    renamed = [dict(series[0], name="0001-renamed.patch")] + series[1:]
    assert image_tag(dockerfile(), renamed, PINS) != before


def test_every_pin_and_the_dockerfile_change_the_tag():
    series = read_series()
    before = image_tag(dockerfile(), series, PINS)
    for key in PINS:
        assert image_tag(dockerfile(), series, dict(PINS, **{key: PINS[key] + "x"})) != before, key
    assert image_tag(dockerfile() + "\n# edited", series, PINS) != before


def test_series_hash_follows_names_and_bytes_in_order():
    series = read_series()
    assert series_hash(series) == series_hash(list(series))
    assert series_hash(series) != series_hash(list(reversed(series)))
    assert len(series_hash(series)) == 64


FIXTURES = os.path.join(HERE, "fixtures", "buildx")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_a_conflicting_patch_is_named_from_real_buildx_output():
    """Recorded: docker buildx 0.13.1 on Docker 20.10, the scenario's series plus a conflicting patch."""
    log = fixture("conflicting-patch.txt")
    # The step header echoes the Dockerfile text ("[E_PATCHES] patch ${patch}" expanded or not);
    # only the step's own output may decide.
    assert "[E_PATCHES] patch ${patch}" in log
    failure = build_failure(log, "94264f315cef21670e528eb864de869e90f2a395")
    assert failure["code"] == "E_PATCHES"
    assert failure["patch"] == "0101-conflicting-change.patch"
    assert failure["what"] == ("patch 0101-conflicting-change.patch does not apply cleanly on TensorFold "
                               "94264f315cef after the patches before it")


def test_a_crlf_patch_keeps_the_dockerfiles_note_on_why():
    log = ("#12 0.041 error: patch failed: native/series.txt:1\n#12 0.041 [E_PATCHES] patch 0002-b.patch does not apply "
           "cleanly on abc after the patches before it (its lines end in CRLF: git apply, unlike GNU patch, keeps the CRs, "
           "so they match only files with CRLF endings)\n")
    failure = build_failure(log, "94264f315cef21670e528eb864de869e90f2a395")
    assert failure["patch"] == "0002-b.patch"
    assert failure["what"] == ("patch 0002-b.patch does not apply cleanly on TensorFold 94264f315cef after the patches before "
                               "it (its lines end in CRLF: git apply, unlike GNU patch, keeps the CRs, so they match only "
                               "files with CRLF endings)")


def test_a_zig_checksum_mismatch_is_an_e_image_from_the_failing_step():
    """Recorded: the same build with a wrong ZIG_SHA256; cached steps' headers also mention E_IMAGE."""
    failure = build_failure(fixture("zig-checksum-mismatch.txt"))
    assert failure["code"] == "E_IMAGE"
    assert failure["what"].startswith("http://127.0.0.1:8787/zig-x86_64-linux-0.17.0.tar.xz does not match the pinned sha256 0000")


def test_cached_step_headers_alone_are_not_taken_for_the_cause():
    log = fixture("conflicting-patch.txt")
    headers_only = "\n".join(line for line in log.splitlines() if not line.startswith(("#12 0.", "0.")))
    failure = build_failure(headers_only)
    assert failure["code"] == "E_IMAGE"
    assert failure["what"] == ('the image build failed: step [builder 8/10] RUN while IFS= read -r patch; do [ -n "${patch}" ] '
                               '|| continue; if ... failed with exit code 1')


def test_an_uncoded_failed_step_is_named_with_its_exit_code_and_the_lines_that_look_like_its_cause():
    """Recorded: docker buildx 0.13.1 on Docker 20.10, a step that prints 30 progress lines to stdout
    and a Zig-style compile error to stderr, then exits 1 (the engine build failing). The summary box
    BuildKit prints holds only the last 10 lines, none of them the error; the final ERROR line is
    the command's echo."""
    log = fixture("engine-build-error.txt")
    failure = build_failure(log)
    assert failure["code"] == "E_IMAGE"
    assert failure["what"].startswith("the image build failed: step [builder 2/2] RUN --mount=type=cache,target=/root/.cache/zig ")
    assert " failed with exit code 1; its last lines: " in failure["what"]
    assert "src/engine/attn.zig:412:9: error: expected ';', found 'const'" in failure["what"]
    assert "compile step" not in failure["what"] and "executor failed running" not in failure["what"]
    assert len(failure["what"]) < 600


def test_a_failed_step_that_printed_no_cause_shows_its_last_lines():
    log = "#7 [builder 9/10] RUN make\n" + "".join("#7 0.%d line %d\n" % (i, i) for i in range(12)) + \
          '#7 ERROR: process "/bin/bash -o pipefail -c make" did not complete successfully: exit code: 2\n'
    assert build_failure(log)["what"] == ("the image build failed: step [builder 9/10] RUN make failed with exit code 2; "
                                          "its last lines: line 7 | line 8 | line 9 | line 10 | line 11")


def test_a_full_disk_is_e_disk_with_how_to_free_docker_space():
    """Recorded: docker buildx 0.13.1 on Docker 20.10, a step whose cp writes to /dev/full (ENOSPC)."""
    message = build_problem({"failed": True, "msg": "Error building", "stderr": fixture("disk-full.txt")}, "gpu-a")
    assert message.startswith("[E_DISK] gpu-a: the image build ran out of disk space: "
                              "#5 0.213 cp: error writing '/dev/full': No space left on device. Free space on the filesystem "
                              "of Docker's data root"), message
    # The daemon's own ENOSPC while it writes a layer reaches the operator the same way.
    daemon = "ERROR: failed to solve: failed to copy files: write /var/lib/docker/tmp/x: no space left on device"
    assert build_failure(daemon)["code"] == "E_DISK"


def test_a_long_build_log_keeps_only_its_tail():
    log = "\n".join("line %d" % i for i in range(1000))
    tail = log_tail(log)
    assert tail.splitlines()[0] == "(960 earlier lines left out)"
    assert tail.splitlines()[1:] == ["line %d" % i for i in range(960, 1000)]
    assert log_tail("a\nb") == "a\nb" and log_tail(None) is None


def test_a_build_with_no_output_still_reports_e_image():
    assert build_failure("")["code"] == "E_IMAGE"


def test_a_failed_build_result_becomes_the_coded_message_wherever_buildkit_wrote():
    """docker_image_build puts BuildKit's output in stderr or stdout and its own summary in msg."""
    log = fixture("conflicting-patch.txt")
    for where in ("stderr", "stdout", "msg"):
        result = {"failed": True, "msg": "Error building tensorfold-native:abc", where: log}
        if where == "msg":
            result["msg"] = "Error building tensorfold-native:abc - " + log
        message = build_problem(result, "gpu-a", "94264f315cef21670e528eb864de869e90f2a395")
        assert message.startswith("[E_PATCHES] gpu-a: patch 0101-conflicting-change.patch does not apply cleanly on "
                                  "TensorFold 94264f315cef after the patches before it. "), where


def test_a_failed_build_without_a_coded_line_reports_its_last_error_as_e_image():
    message = build_problem({"failed": True, "msg": "Error building x", "stderr": "ERROR: failed to solve: boom",
                             "stdout": None}, "gpu-b")
    assert message.startswith("[E_IMAGE] gpu-b: the image build failed: ERROR: failed to solve: boom.")


def test_a_build_that_never_started_reports_what_was_said():
    message = build_problem({"failed": True, "msg": '"/srv/ctx/Dockerfile" is not an existing file', "stderr": "",
                             "stdout": ""}, "gpu-c")
    assert message.startswith('[E_IMAGE] gpu-c: the image build failed: "/srv/ctx/Dockerfile" is not an existing file.')


@pytest.mark.parametrize("said", [
    # community.docker's docker_image_build on Docker 20.10 without the plugin (recorded on this controller).
    "Docker CLI /usr/local/bin/docker does not have the buildx plugin installed",
    "Error building x:t - code: 125\ndocker: 'buildx' is not a docker command.",
    # Docker 20.10's CLI run as `docker buildx version` without the plugin (recorded).
    "docker: unknown command: docker buildx",
    # Debian's docker.io 20.10 CLI, `DOCKER_BUILDKIT=1 docker build` without the plugin (recorded).
    "ERROR: BuildKit is enabled but the buildx component is missing or broken.",
])
def test_a_host_without_buildx_is_e_docker_with_how_to_install_it(said):
    message = build_problem({"failed": True, "msg": said, "stderr": "", "stdout": ""}, "gpu-c")
    assert message.startswith("[E_DOCKER] gpu-c: Docker on this host has no buildx plugin, which the image build needs"), message
    assert message.endswith("`docker buildx version` must answer), then run again."), message
    assert "fix the build inputs" not in message


def test_inputs_hash_the_series_into_the_build_args_and_tag_all_of_it():
    series = read_series()
    got = inputs(series, "gpu1", dockerfile(), PINS)
    assert got["series_hash"] == series_hash(series)
    assert got["build_args"] == dict(PINS, PATCH_SERIES_SHA256=series_hash(series))
    assert got["tag"] == image_tag(dockerfile(), series, dict(PINS, PATCH_SERIES_SHA256=series_hash(series)))
    assert got["problems"] == []


def test_inputs_report_each_series_problem_as_an_e_patches_record():
    series = read_series() + [{"name": "fix.diff", "sha256": "0" * 64, "source": "site"}]
    got = inputs(series, "gpu1", dockerfile(), PINS, expected_count=len(series) + 5)
    assert [p["code"] for p in got["problems"]] == ["E_PATCHES", "E_PATCHES"]
    assert got["problems"][0]["message"].startswith("[E_PATCHES] gpu1: patch fix.diff (site) is not named NNNN-name.patch")
    assert "expected" in got["problems"][1]["message"]


IMAGE_SETTINGS = {
    "tensorfold_image_engine_commit": "f350cd3e" + "0" * 32,
    "tensorfold_image_zig_sha256": "1" * 64,
    "tensorfold_image_patch_series_repo": "https://example.invalid/series.git",
    "tensorfold_image_patch_series_commit": "2" * 40,
    "tensorfold_image_patch_series_dir": "",
    "tensorfold_image_site_patches_dir": "",
    "tensorfold_image_build_strategy": "auto",
    "tensorfold_image_registry": "",
    "tensorfold_image_move_port": 18471,
}


def image_settings_named(changes, folders=()):
    from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import settings_problems
    found = settings_problems(dict(IMAGE_SETTINGS, **changes), "gpu-a", lambda path: path in folders)
    assert all(entry["message"].startswith("[E_SETTINGS] gpu-a: ") for entry in found)
    return [entry["setting"] for entry in found]


def test_image_settings_that_can_build_have_no_problem():
    assert image_settings_named({}) == []
    assert image_settings_named({"tensorfold_image_patch_series_dir": "/series", "tensorfold_image_patch_series_commit": "",
                                 "tensorfold_image_site_patches_dir": "/site", "tensorfold_image_move_port": "65535"},
                                folders=("/series", "/site")) == []


def test_each_bad_image_setting_is_named():
    assert image_settings_named({"tensorfold_image_engine_commit": "f350cd3e"}) == ["tensorfold_image_engine_commit"]
    assert image_settings_named({"tensorfold_image_engine_commit": ""}) == ["tensorfold_image_engine_commit"]
    assert image_settings_named({"tensorfold_image_zig_sha256": "1" * 63}) == ["tensorfold_image_zig_sha256"]
    assert image_settings_named({"tensorfold_image_patch_series_commit": "abc"}) == ["tensorfold_image_patch_series_repo"]
    assert image_settings_named({"tensorfold_image_patch_series_repo": ""}) == ["tensorfold_image_patch_series_repo"]
    assert image_settings_named({"tensorfold_image_patch_series_dir": "/gone"}) == ["tensorfold_image_patch_series_dir"]
    assert image_settings_named({"tensorfold_image_site_patches_dir": "/gone"}) == ["tensorfold_image_site_patches_dir"]
    assert image_settings_named({"tensorfold_image_build_strategy": "registry"}) == ["tensorfold_image_registry"]
    for port in (0, 65536, "x", None):
        assert image_settings_named({"tensorfold_image_move_port": port}) == ["tensorfold_image_move_port"]


def test_every_bad_image_setting_at_once():
    named = image_settings_named({"tensorfold_image_engine_commit": "", "tensorfold_image_zig_sha256": "",
                                  "tensorfold_image_move_port": 0})
    assert named == ["tensorfold_image_engine_commit", "tensorfold_image_zig_sha256", "tensorfold_image_move_port"]
