# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.docker_daemon_config import (
    DaemonConfigError,
    detect_indent,
    detect_eol,
    merge_runtime,
    runtime_entry,
    same_runtime_path,
    set_member,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "daemon_json")
RUNTIME = "/usr/bin/nvidia-container-runtime"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def only_inserted(old, new):
    """True when new is old with one contiguous piece of text added (nothing else moved)."""
    prefix = 0
    while prefix < len(old) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < len(old) - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    return prefix + suffix == len(old)


def test_empty_file_gets_the_layout_nvidia_ctk_writes():
    new, changed = merge_runtime("", "nvidia", "nvidia-container-runtime")
    assert changed
    assert new == fixture("nvidia_ctk_written.json") + "\n"


def test_file_written_by_nvidia_ctk_is_left_alone():
    text = fixture("nvidia_ctk_written.json")
    assert merge_runtime(text, "nvidia", "nvidia-container-runtime") == (text, False)


def test_operator_keys_keep_every_byte_and_the_runtime_is_added():
    old = fixture("operator_2space.json")
    new, changed = merge_runtime(old, "nvidia", RUNTIME)
    assert changed
    assert only_inserted(old, new)
    document = json.loads(new)
    assert document["runtimes"] == {"nvidia": {"args": [], "path": RUNTIME}}
    assert document["log-opts"] == {"max-size": "100m", "max-file": "3"}
    # the addition follows the file's own 2-space style
    assert '\n  "runtimes": {\n    "nvidia": {\n      "args": [],\n      "path": "%s"\n    }\n  }\n}\n' % RUNTIME in new


def test_second_merge_changes_nothing():
    once, dummy = merge_runtime(fixture("operator_2space.json"), "nvidia", RUNTIME)
    assert merge_runtime(once, "nvidia", RUNTIME) == (once, False)


def test_one_line_file_stays_on_one_line():
    old = fixture("one_line.json")
    new, changed = merge_runtime(old, "nvidia", RUNTIME)
    assert changed and only_inserted(old, new)
    assert "\n" not in new
    assert new.endswith(', "runtimes": {"nvidia": {"args": [], "path": "%s"}}}' % RUNTIME)


def test_tabs_and_another_runtime_are_kept():
    old = fixture("tabs_other_runtime.json")
    new, changed = merge_runtime(old, "nvidia", RUNTIME)
    assert changed and only_inserted(old, new)
    assert '\t\t},\n\t\t"nvidia": {\n\t\t\t"args": [],\n\t\t\t"path": "%s"\n\t\t}\n\t},' % RUNTIME in new
    assert json.loads(new)["runtimes"]["crun"] == {"path": "/usr/bin/crun"}


def test_stale_nvidia_path_is_replaced_and_nothing_around_it_moves():
    old = fixture("stale_nvidia.json")
    new, changed = merge_runtime(old, "nvidia", RUNTIME)
    assert changed
    stale = '"/usr/local/bin/nvidia-container-runtime"'
    assert new == old.replace(stale, '"%s"' % RUNTIME)  # only the path's bytes
    assert json.loads(new)["runtimes"]["nvidia"] == {"path": RUNTIME, "runtimeArgs": []}
    assert json.loads(new)["features"] == {"buildkit": True}


def test_empty_runtimes_object_is_filled_in_the_file_style():
    new, changed = merge_runtime(fixture("empty_runtimes.json"), "nvidia", RUNTIME)
    assert changed
    assert new == '{\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n            "path": "%s"\n        }\n    }\n}\n' % RUNTIME


def test_default_runtime_is_set_only_when_asked():
    old = fixture("operator_2space.json")
    without, dummy = merge_runtime(old, "nvidia", RUNTIME)
    assert "default-runtime" not in json.loads(without)
    with_default, changed = merge_runtime(old, "nvidia", RUNTIME, set_default=True)
    assert changed and json.loads(with_default)["default-runtime"] == "nvidia"
    assert merge_runtime(with_default, "nvidia", RUNTIME, set_default=True) == (with_default, False)


def test_runtime_args_are_written():
    # dockerd reads runtimeArgs; args is nvidia-ctk's key, which dockerd ignores
    new, dummy = merge_runtime("{}", "nvidia", RUNTIME, ["--debug"])
    assert json.loads(new)["runtimes"]["nvidia"] == {"args": [], "path": RUNTIME, "runtimeArgs": ["--debug"]}
    assert merge_runtime(new, "nvidia", RUNTIME, ["--debug"]) == (new, False)


OWNED_BY_OTHERS = ('{\n  "runtimes": {\n    "nvidia": {\n      "args": [],\n      "path": "/opt/nvidia/nvidia-container-runtime",\n'
                   '      "runtimeArgs": ["--log-level=debug"],\n      "x-note": "site"\n    }\n  }\n}\n')


def test_existing_entry_keeps_what_is_not_ours_when_the_path_changes():
    new, changed = merge_runtime(OWNED_BY_OTHERS, "nvidia", RUNTIME)
    assert changed
    assert new == OWNED_BY_OTHERS.replace("/opt/nvidia/nvidia-container-runtime", RUNTIME)
    assert json.loads(new)["runtimes"]["nvidia"]["runtimeArgs"] == ["--log-level=debug"]


def test_given_arguments_replace_only_runtime_args():
    new, changed = merge_runtime(OWNED_BY_OTHERS, "nvidia", "/opt/nvidia/nvidia-container-runtime", ["--debug"])
    assert changed
    assert new == OWNED_BY_OTHERS.replace('["--log-level=debug"]', '["--debug"]')


def test_an_entry_for_a_shim_is_refused_rather_than_made_unstartable():
    # dockerd refuses path next to runtimeType or options: adding ours would keep it from starting
    old = '{"runtimes": {"nvidia": {"runtimeType": "io.containerd.runc.v2", "options": {"BinaryName": "nvidia-container-runtime"}}}}'
    with pytest.raises(DaemonConfigError) as info:
        merge_runtime(old, "nvidia", RUNTIME)
    assert "runtimeType or options" in str(info.value)


def resolve_on_host(path):
    """The host of these tests: nvidia-container-runtime is found as /usr/bin/..., crun nowhere."""
    return {"nvidia-container-runtime": RUNTIME, RUNTIME: RUNTIME,
            "/usr/local/bin/nvidia-container-runtime": "/usr/local/bin/nvidia-container-runtime"}.get(path)


@pytest.mark.parametrize("text", [
    fixture("nvidia_ctk_written.json"),  # bare name, which dockerd finds on its PATH
    '{\n  "runtimes": {\n    "nvidia": {\n      "path": "%s"\n    }\n  }\n}\n' % RUNTIME,  # Docker's docs
    '{\n  "runtimes": {\n    "nvidia": {\n      "path": "%s",\n      "runtimeArgs": []\n    }\n  }\n}\n' % RUNTIME,
    '{"runtimes": {"nvidia": {"path": "%s", "runtimeArgs": null}}}' % RUNTIME,
])
def test_an_entry_that_means_the_same_is_left_alone(text):
    assert merge_runtime(text, "nvidia", RUNTIME, [], resolve=resolve_on_host) == (text, False)


def test_a_bare_name_that_resolves_elsewhere_is_replaced_keeping_args():
    text = fixture("nvidia_ctk_written.json")
    new, changed = merge_runtime(text, "nvidia", "/usr/local/bin/nvidia-container-runtime", resolve=resolve_on_host)
    assert changed
    assert json.loads(new)["runtimes"]["nvidia"] == {"args": [], "path": "/usr/local/bin/nvidia-container-runtime"}


@pytest.mark.parametrize("wanted,present,same", [
    (RUNTIME, RUNTIME, True),
    ("nvidia-container-runtime", "nvidia-container-runtime", True),
    (RUNTIME, "nvidia-container-runtime", True),
    ("nvidia-container-runtime", RUNTIME, True),
    ("/usr/local/bin/nvidia-container-runtime", "nvidia-container-runtime", False),  # PATH finds /usr/bin's
    (RUNTIME, "crun", False),
    ("/opt/crun", "crun", False),  # crun is nowhere on PATH
    (RUNTIME, "/usr/local/bin/nvidia-container-runtime", False),  # two absolute paths: the strings decide
])
def test_same_runtime_path(wanted, present, same):
    assert same_runtime_path(wanted, present, resolve_on_host) is same


def test_without_resolution_only_equal_paths_match():
    assert not same_runtime_path(RUNTIME, "nvidia-container-runtime")


def test_a_utf8_byte_order_mark_is_accepted_and_kept():
    old = "\ufeff" + fixture("operator_2space.json")
    new, changed = merge_runtime(old, "nvidia", RUNTIME)
    assert changed and new.startswith("\ufeff{\n") and only_inserted(old, new)
    assert merge_runtime(new, "nvidia", RUNTIME) == (new, False)


def test_crlf_file_gets_crlf_lines():
    old = fixture("operator_2space.json").replace("\n", "\r\n")
    new, changed = merge_runtime(old, "nvidia", RUNTIME, set_default=True)
    assert changed and "\n" not in new.replace("\r\n", "")
    assert json.loads(new)["runtimes"]["nvidia"]["path"] == RUNTIME
    assert detect_eol(old) == "\r\n" and detect_eol("{}\n") == "\n"


def test_empty_crlf_runtimes_object_is_filled_with_crlf():
    new, dummy = merge_runtime("{\r\n}\r\n", "nvidia", RUNTIME)
    assert "\n" not in new.replace("\r\n", "")


def test_null_runtimes_is_an_empty_object():
    new, changed = merge_runtime('{"runtimes": null}', "nvidia", RUNTIME)
    assert changed and json.loads(new) == {"runtimes": {"nvidia": runtime_entry(RUNTIME)}}


def test_duplicate_keys_follow_the_parser_last_one_wins():
    old = '{"runtimes": {"nvidia": {"path": "old"}}, "runtimes": {}}'
    new, dummy = merge_runtime(old, "nvidia", RUNTIME)
    assert new.startswith('{"runtimes": {"nvidia": {"path": "old"}}, "runtimes": {')
    assert json.loads(new)["runtimes"]["nvidia"]["path"] == RUNTIME


@pytest.mark.parametrize("text,needle", [
    ('{"log-driver": ', "not valid JSON"),
    ('["nvidia"]', "not a JSON object"),
    ('{"runtimes": "nvidia"}', "runtimes is not a JSON object"),
    ('{"log-opts": {"max-size": NaN}}', "NaN"),  # Python reads these, dockerd does not
    ('{"x": -Infinity}', "Infinity"),
    ('{"max-concurrent-downloads": 1e400}', "the number 1e400 is out of range"),  # Go's float64 cannot hold it
    ('{"x": -%s}' % ("9" * 400), "out of range"),
])
def test_files_that_cannot_be_merged_are_refused(text, needle):
    with pytest.raises(DaemonConfigError) as info:
        merge_runtime(text, "nvidia", RUNTIME)
    assert needle in str(info.value)


def test_numbers_a_float64_holds_keep_their_bytes():
    text = '{"max-concurrent-downloads": 3, "x": 1e3, "y": 1.7976931348623157e308, "z": %s}' % ("9" * 300)
    new, changed = merge_runtime(text, "nvidia", RUNTIME)
    assert changed and new.startswith(text[:-1])


def test_indent_is_read_from_the_file():
    assert detect_indent(fixture("operator_2space.json")) == "  "
    assert detect_indent(fixture("tabs_other_runtime.json")) == "\t"
    assert detect_indent(fixture("one_line.json")) == "    "


def test_set_member_creates_missing_parents():
    new, changed = set_member('{\n  "a": 1\n}\n', ["x", "y"], 2)
    assert changed and new == '{\n  "a": 1,\n  "x": {\n    "y": 2\n  }\n}\n'
