# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.settings import check_settings

GOOD = {
    "tensorfold_model_source": "download",
    "tensorfold_model_revision": "078455ffe6472f9a52fbc1139f58b9db2881b25c",
    "tensorfold_ablit": False,
    "tensorfold_hf_token": "",
    "tensorfold_gpus": [0, 1],
    "tensorfold_parallel": 4,
    "tensorfold_context": "auto",
    "tensorfold_memory_reserve_gib": 3.5,
    "tensorfold_max_tokens": 32768,
    "tensorfold_port": 8020,
    "tensorfold_nccl_port": 29583,
    "tensorfold_wait_timeout": 2400,
    "tensorfold_data_dir": "/srv/glm53",
    "tensorfold_container_name": "glm53-zig",
    "tensorfold_api_key": "",
}


def _with(**changes):
    settings = dict(GOOD)
    settings.update(changes)
    return settings


def _settings_named(problems):
    return sorted(p["setting"] for p in problems)


def test_recipe_defaults_have_no_problems():
    assert check_settings(GOOD, "gpu1") == []


@pytest.mark.parametrize("name,value", [
    ("tensorfold_parallel", 0),
    ("tensorfold_parallel", 9),
    ("tensorfold_parallel", "many"),
    ("tensorfold_context", 2000000),
    ("tensorfold_context", 100),
    ("tensorfold_context", "max"),
    ("tensorfold_gpus", [0]),
    ("tensorfold_gpus", [1, 1]),
    ("tensorfold_gpus", [0, 1, 2]),
    ("tensorfold_memory_reserve_gib", -1),
    ("tensorfold_model_revision", "main"),
    ("tensorfold_port", 70000),
    ("tensorfold_port", 29584),
    ("tensorfold_wait_timeout", 5),
    ("tensorfold_data_dir", "srv/glm53"),
    ("tensorfold_container_name", "bad name"),
])
def test_each_bad_setting_is_named_with_host_and_code(name, value):
    problems = check_settings(_with(**{name: value}), "gpu7")
    assert len(problems) == 1, problems
    problem = problems[0]
    assert problem["code"] == "E_SETTINGS"
    assert problem["severity"] == "error"
    assert problem["setting"] == name
    assert problem["message"].startswith("[E_SETTINGS] gpu7: %s " % name)


@pytest.mark.parametrize("name,value", [
    ("tensorfold_parallel", "auto"),
    ("tensorfold_parallel", "8"),
    ("tensorfold_context", 1048576),
    ("tensorfold_context", "262144"),
    ("tensorfold_gpus", [1, 0]),
    ("tensorfold_memory_reserve_gib", 0),
])
def test_edge_values_are_accepted(name, value):
    assert check_settings(_with(**{name: value}), "h") == []


def test_all_problems_are_reported_at_once():
    problems = check_settings(_with(tensorfold_parallel=0, tensorfold_context=2000000, tensorfold_gpus=[0]), "h")
    assert _settings_named(problems) == ["tensorfold_context", "tensorfold_gpus", "tensorfold_parallel"]


def test_ablit_without_a_token_is_not_a_settings_problem():
    # Verified Ablit weights in place serve without a token; weights_fetch asks for it only when
    # gated files must be downloaded.
    assert check_settings(_with(tensorfold_ablit=True), "h") == []


def test_local_source_needs_an_absolute_model_dir():
    assert _settings_named(check_settings(_with(tensorfold_model_source="local"), "h")) == ["tensorfold_model_dir"]
    assert _settings_named(check_settings(_with(tensorfold_model_source="local", tensorfold_model_dir="models/x"), "h")) == ["tensorfold_model_dir"]
    assert check_settings(_with(tensorfold_model_source="local", tensorfold_model_dir="/data/ckpt"), "h") == []


def test_api_key_problem_never_echoes_the_key():
    canary = "canary secret,value"
    problems = check_settings(_with(tensorfold_api_key=canary), "h")
    assert _settings_named(problems) == ["tensorfold_api_key"]
    assert canary not in problems[0]["message"]
    assert "canary" not in problems[0]["message"]


def test_boolean_is_not_a_stream_count():
    assert _settings_named(check_settings(_with(tensorfold_parallel=True), "h")) == ["tensorfold_parallel"]


# What the roles and engine_args read from the raw value must be what the check accepted.

@pytest.mark.parametrize("name,value", [
    ("tensorfold_parallel", "auto "),  # reaches the engine as "auto "
    ("tensorfold_context", " 4096"),
    ("tensorfold_memory_reserve_gib", True),
    ("tensorfold_memory_reserve_gib", "1e1"),  # the engine gets the text
    ("tensorfold_data_dir", "/"),
    ("tensorfold_data_dir", "/srv/a:b"),  # splits docker's -v
    ("tensorfold_data_dir", "/srv/a,b"),  # splits docker's --mount
    ("tensorfold_data_dir", "/srv/a\nb"),
    ("tensorfold_host", ""),
    ("tensorfold_host", "not an ip"),
    ("tensorfold_host", "999.1.1.1"),
    ("tensorfold_host", "[::1]"),
    ("tensorfold_host", "localhost"),
    ("tensorfold_max_gpu_used_mib", -1),
    ("tensorfold_min_gpu_free_mib", -1),
    ("tensorfold_max_fail_percentage", 101),
    ("tensorfold_max_fail_percentage", -1),
    ("tensorfold_restart_max_fail_percentage", 150),
    ("weights_fetch_peer_fanout", -1),
    ("weights_fetch_peer_fanout", "two"),
    ("weights_fetch_peer_fanout", "auto "),
    ("tensorfold_serial", "abc"),
    ("tensorfold_serial", "0"),
    ("tensorfold_serial", "150%"),
    ("tensorfold_serial", "2.5"),
    ("tensorfold_serial", []),
    ("tensorfold_serial", [1, "x"]),
    ("tensorfold_restart_serial", 0),
    ("tensorfold_served_name", ""),
    ("tensorfold_served_name", " GLM"),
    ("tensorfold_model_repo", ""),
    ("tensorfold_model_repo", "not a repo"),
    ("tensorfold_model_repo", "GLM-5.3-Flash"),
    ("tensorfold_drafter_repo", "owner/name\n"),
    ("tensorfold_hf_endpoint", "huggingface.co"),
    ("tensorfold_hf_endpoint", "ftp://mirror"),
    ("tensorfold_hf_endpoint", "https://hf mirror"),
    ("tensorfold_model_revision", "078455ffe6472f9a52fbc1139f58b9db2881b25c\n"),
    ("tensorfold_image_name", "GLM53/TensorFold"),
    ("tensorfold_image_name", "glm53/tensorfold-native:v1"),
    ("tensorfold_image_name", "glm53//native"),
    ("tensorfold_image_name", "-glm53"),
    ("tensorfold_image_registry", "registry.example:5000/GLM"),
    ("tensorfold_image_runtime_image", "nvidia/cuda:bad tag"),
    ("tensorfold_engine_names", {"dense": "BAD NAME"}),
    ("tensorfold_engine_names", {"dense": "--port"}),  # the collection's own flag
    ("tensorfold_engine_names", {"head": "--master"}),
    ("tensorfold_engine_names", {"dense": "TENSORFOLD_API_KEY"}),  # the runner clears it
    ("tensorfold_engine_names", {"w8a8": "CUDA_VISIBLE_DEVICES"}),
    ("tensorfold_engine_names", {"dense": "TENSORFOLD_HEAD"}),  # head keeps that name
    ("tensorfold_engine_names", {"dense": None}),
])
def test_values_the_roles_would_read_otherwise_are_refused(name, value):
    problems = check_settings(_with(**{name: value}), "gpu7")
    assert _settings_named(problems) == [name], problems
    assert problems[0]["message"].startswith("[E_SETTINGS] gpu7: %s" % name)


@pytest.mark.parametrize("name,good,bad", [
    ("tensorfold_host", "0.0.0.0", "0.0.0.0.0"),
    ("tensorfold_host", "::", "[::]"),
    ("tensorfold_host", "::1", "::g"),
    ("tensorfold_host", "10.1.2.3", "10.1.2.300"),
    ("tensorfold_data_dir", "/srv/my data", "/srv/my:data"),
    ("tensorfold_data_dir", "/srv/glm53/", "//"),
    ("tensorfold_max_gpu_used_mib", 0, -4096),
    ("tensorfold_max_fail_percentage", 100, 1000),
    ("tensorfold_max_fail_percentage", "0", "-0.5"),
    ("tensorfold_serial", "100%", "100.0%"),
    ("tensorfold_serial", "25%", "0%"),
    ("tensorfold_serial", 3, -3),
    ("tensorfold_serial", "3", "3 hosts"),
    ("tensorfold_serial", [1, "25%", "100%"], [1, [2]]),
    ("tensorfold_restart_serial", 1, "1.0"),
    ("tensorfold_memory_reserve_gib", "3.5", "1e1"),
    ("tensorfold_memory_reserve_gib", 4, True),
    ("tensorfold_parallel", "AUTO", "AUTO\n"),
    ("tensorfold_model_repo", "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold", "Mia-AiLab/GLM/5.3"),
    ("tensorfold_hf_endpoint", "https://hf-mirror.internal.example", "https:/hf-mirror.internal.example"),
    ("tensorfold_hf_endpoint", "http://hub:8080/", "hub:8080"),
    ("tensorfold_image_name", "glm53/tensorfold-native", "glm53/tensorfold-native-"),
    ("tensorfold_image_name", "registry.example:5000/glm53/tensorfold__native", "registry.example:5000/glm53/tensorfold___native"),
    ("tensorfold_image_name", "localhost/tf", "Registry/tf"),
    ("tensorfold_image_registry", "registry.internal.example:5000/glm53/tensorfold-native", "registry.internal.example:port/glm53"),
    ("tensorfold_image_runtime_image", "nvidia/cuda:13.0.1-runtime-ubuntu24.04@sha256:" + "c3" * 32,
     "nvidia/cuda:13.0.1-runtime-ubuntu24.04@sha256:c3"),
    ("tensorfold_image_builder_image", "glm53-test/debian12:latest", "glm53-test/debian12:" + "x" * 129),
    ("tensorfold_engine_names", {"dense": "--dense", "kv_pages": "TF_KV_PAGES"}, {"dense": "--dense", "kv_pages": "--dense"}),
    ("tensorfold_engine_names", {"dense": "TENSORFOLD_HEAD", "head": "--head"}, {"dense": "TENSORFOLD_HEAD"}),
    ("tensorfold_served_name", "GLM-5.3-Flash", "GLM-5.3-Flash\n"),
])
def test_a_well_formed_value_passes_and_its_near_miss_does_not(name, good, bad):
    assert check_settings(_with(**{name: good}), "h") == []
    assert _settings_named(check_settings(_with(**{name: bad}), "h")) == [name]


def test_a_local_model_dir_is_checked_as_written():
    for bad in ("~/ckpt", "/data/a:b", "/"):
        assert _settings_named(check_settings(_with(tensorfold_model_source="local", tensorfold_model_dir=bad), "h")) == ["tensorfold_model_dir"]
    # "no" is false for the roles' bool filter: not an Ablit request.
    assert check_settings(_with(tensorfold_model_source="local", tensorfold_model_dir="/data/c", tensorfold_ablit="no"), "h") == []


@pytest.mark.parametrize("value", [["hf_canaryToken1"], {"t": "hf_canaryToken1"}, 12345678, "hf_canary Token1", "hf_canaryToken1\n"])
def test_a_malformed_token_is_refused_without_showing_it(value):
    problems = check_settings(_with(tensorfold_hf_token=value), "h")
    assert _settings_named(problems) == ["tensorfold_hf_token"]
    assert "canary" not in problems[0]["message"] and "12345678" not in problems[0]["message"]


@pytest.mark.parametrize("value", [["sk-canaryKey1"], {"k": "sk-canaryKey1"}])
def test_an_api_key_that_is_not_text_is_refused_without_showing_it(value):
    problems = check_settings(_with(tensorfold_api_key=value), "h")
    assert _settings_named(problems) == ["tensorfold_api_key"]
    assert "not text" in problems[0]["message"] and "canary" not in problems[0]["message"]


def test_the_reserved_engine_names_come_from_engine_args():
    from ansible_collections.glm53.tensorfold.plugins.module_utils.settings import reserved_engine_names
    flags, env = reserved_engine_names()
    assert {"--port", "--host", "--master", "--master-port", "--api-key-file", "--tp", "--rank", "--device",
            "--no-drafts", "--thinking", "--no-thinking"} <= flags
    assert {"TENSORFOLD_API_KEY", "TENSORFOLD_MEMORY_RESERVE_GIB", "CUDA_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME"} <= env
    # The knobs' own default names stay free for the knobs.
    assert "TF_GLM_DENSE" not in env


# The gateway's defaults (roles/gateway/meta/argument_specs.yml) and the shared ones it reads.
GATEWAY_DEFAULTS = {"gateway_check_interval": 5, "gateway_check_timeout": 2, "gateway_check_fastinter_ms": 500,
                    "gateway_check_fall": 2, "gateway_port": 8020, "gateway_bind": "*", "gateway_stats_port": 8404,
                    "gateway_stats_bind": "*", "gateway_fleet_group": "gpu_hosts", "tensorfold_port": 8020,
                    "tensorfold_host": "0.0.0.0"}
FLEET = {"all": ["gw", "gpu1", "gpu2"], "gpu_hosts": ["gpu1", "gpu2"], "gateways": ["gw"]}


def _gateway(settings, host="gw", groups=None):
    return check_settings(settings, host, groups or FLEET, GATEWAY_DEFAULTS)


def test_a_gateway_with_the_defaults_passes_and_its_rules_bind_only_gateway_hosts():
    assert _gateway({}) == []
    # The same values on a box that is no gateway (group_vars/all) are not its business.
    assert _gateway({"gateway_check_fall": 1, "gateway_check_timeout": 4}, host="gpu1") == []


def test_a_gateway_check_fall_below_2_is_refused_in_pre_flight():
    problems = _gateway({"gateway_check_fall": 1})
    assert _settings_named(problems) == ["gateway_check_fall"]
    assert problems[0]["message"].startswith("[E_SETTINGS] gw: gateway_check_fall is 1: a box put back would read UP")
    assert "Set gateway_check_fall to 2 or more." in problems[0]["message"]


def test_a_check_timing_that_keeps_a_wedged_engine_too_long_is_refused_against_the_defaults():
    # A longer timeout alone no longer fits the default interval: 2 x 3 s + 500 ms > 5 s.
    problems = _gateway({"gateway_check_timeout": 3})
    assert _settings_named(problems) == ["gateway_check_timeout"]
    assert "exceeds gateway_check_interval (5 s)" in problems[0]["message"]
    assert _gateway({"gateway_check_timeout": "3", "gateway_check_interval": "10"}) == []
    # A value that is no whole number is its type check's business, not a second message here.
    assert _gateway({"gateway_check_timeout": "3s"}) == []


def test_inventory_hosts_of_one_server_name_are_refused_on_the_gateway_host():
    groups = dict(FLEET, gpu_hosts=["gpu box@03", "gpu_box_03", "gpu1"])
    problems = _gateway({}, groups=groups)
    assert _settings_named(problems) == ["gateway_fleet_group"]
    assert ("inventory hosts 'gpu box@03' and 'gpu_box_03' become one server name at the gateway (gpu_box_03)"
            in problems[0]["message"])
    # The group the gateway serves is the one read.
    assert _gateway({"gateway_fleet_group": "boxes"}, groups=dict(groups, boxes=["gpu1", "gpu2"])) == []


def test_a_gateway_that_is_also_a_box_must_not_take_its_engine_port():
    groups = dict(FLEET, gpu_hosts=["gw", "gpu1"])
    problems = _gateway({}, groups=groups)
    assert _settings_named(problems) == ["gateway_port"]
    assert "gateway_port 8020 (on *) is also the port of the engine on this host" in problems[0]["message"]
    assert _gateway({"gateway_port": 8080}, groups=groups) == []
    assert _gateway({"tensorfold_port": 8030}, groups=groups) == []
    problems = _gateway({"gateway_port": 8080, "gateway_stats_port": 8020}, groups=groups)
    assert "gateway_stats_port 8020 (on *)" in problems[0]["message"]
    assert _gateway({"gateway_port": 8080, "gateway_stats_port": 0, "tensorfold_port": 8404}, groups=groups) == []


def test_the_image_build_host_is_checked_against_the_inventory_not_the_run():
    assert check_settings({"tensorfold_image_build_host": "gpu2"}, "gpu1", FLEET) == []
    for name in ("gpu9", "gw"):
        problems = check_settings({"tensorfold_image_build_host": name}, "gpu1", FLEET)
        assert _settings_named(problems) == ["tensorfold_image_build_host"], name
        assert "is %r, which is not a host of the inventory's gpu_hosts" % name in problems[0]["message"]
    # The role alone, on an inventory without gpu_hosts: any host of it.
    assert check_settings({"tensorfold_image_build_host": "gw"}, "gw", {"all": ["gw"]}) == []
    assert check_settings({"tensorfold_image_build_host": ""}, "gpu1", FLEET) == []


@pytest.mark.parametrize("version, ok", [("1.18.2-1", True), ("1.19.0~rc.1-1", True), ("1.18.2", False),
                                         ("1.18.2-1\n", False), (" 1.18.2-1", False), (1.18, False)])
def test_the_toolkit_version_form_is_checked_in_pre_flight(version, ok):
    problems = check_settings({"nvidia_toolkit_version": version}, "gpu1")
    assert _settings_named(problems) == ([] if ok else ["nvidia_toolkit_version"])


def test_the_toolkit_keyring_must_be_an_asc_file():
    assert check_settings({"nvidia_toolkit_apt_keyring": "/etc/apt/keyrings/nvidia-container-toolkit.asc"}, "gpu1") == []
    problems = check_settings({"nvidia_toolkit_apt_keyring": "/etc/apt/keyrings/nvidia.gpg"}, "gpu1")
    assert _settings_named(problems) == ["nvidia_toolkit_apt_keyring"]
    assert "which does not end in .asc" in problems[0]["message"]


def test_a_null_api_key_is_refused_without_showing_anything():
    problems = check_settings(_with(tensorfold_api_key=None), "h")
    assert [p["setting"] for p in problems] == ["tensorfold_api_key"]
    assert "is null" in problems[0]["message"] and 'tensorfold_api_key: ""' in problems[0]["message"]
    assert check_settings(_with(tensorfold_api_key=""), "h") == []


@pytest.mark.parametrize("ulimits, ok", [
    (["memlock:-1:-1", "stack:67108864:67108864"], True),
    (["nofile:1024:4096"], True),
    (["memlock=-1"], False),  # docker's own form, which the module's split cannot read
    (["memlock:-1"], False),
    (["mem:1:1"], False),
    (["nofile:4096:1024"], False),
    (["nofile:-1:1024"], False),
    (["nofile:a:1"], False),
    ([None], False),
])
def test_ulimits_are_checked_as_the_module_reads_them(ulimits, ok):
    problems = check_settings({"rank_container_ulimits": ulimits}, "h")
    assert [p["setting"] for p in problems] == ([] if ok else ["rank_container_ulimits"])


@pytest.mark.parametrize("policy, ok", [
    ("no", True), ("always", True), ("unless-stopped", True), ("on-failure", True), ("on-failure:3", True),
    ("on-failure=3", False), ("on-failure:", False), ("sometimes", False), ("", False), ("on-failure:-1", False),
])
def test_the_restart_policy_is_one_docker_update_takes(policy, ok):
    problems = check_settings({"rank_container_restart_policy": policy}, "h")
    assert [p["setting"] for p in problems] == ([] if ok else ["rank_container_restart_policy"])


BOX_DEFAULTS = {"tensorfold_port": 8020, "tensorfold_nccl_port": 29583, "weights_fetch_peer_port": 18470,
                "tensorfold_image_move_port": 18471, "monitoring_node_exporter_port": 9100, "monitoring_node_exporter": True}


@pytest.mark.parametrize("settings, setting", [
    ({"weights_fetch_peer_port": 99999}, "weights_fetch_peer_port"),
    ({"monitoring_node_exporter_port": 0}, "monitoring_node_exporter_port"),
    ({"gateway_port": "80x"}, "gateway_port"),
    ({"gateway_port": -1}, "gateway_port"),
])
def test_every_port_setting_is_range_checked(settings, setting):
    problems = check_settings(settings, "h", None, BOX_DEFAULTS)
    assert [p["setting"] for p in problems] == [setting]
    assert "Use a TCP port from 1 to 65535" in problems[0]["message"]


def test_a_port_that_zero_turns_off_may_be_zero():
    assert check_settings({"gateway_stats_port": 0}, "h", None, BOX_DEFAULTS) == []


@pytest.mark.parametrize("settings, setting, text", [
    ({"weights_fetch_peer_port": 8020}, "weights_fetch_peer_port", "is 8020, which is also tensorfold_port"),
    ({"weights_fetch_peer_port": 8021, "tensorfold_port": 8021}, "weights_fetch_peer_port", "which is also tensorfold_port"),
    ({"tensorfold_port": 9100}, "tensorfold_port", "which is also monitoring_node_exporter_port"),
    ({"tensorfold_image_move_port": 29584}, "tensorfold_image_move_port", "which is also the port after tensorfold_nccl_port"),
    ({"tensorfold_nccl_port": 18469}, "tensorfold_nccl_port", "the port after it (18470) is also weights_fetch_peer_port"),
    ({"tensorfold_port": 29583}, "tensorfold_port", "which is also tensorfold_nccl_port"),
])
def test_the_ports_a_box_listens_on_do_not_clash(settings, setting, text):
    problems = check_settings(settings, "h", {"monitoring": ["prom"]}, BOX_DEFAULTS)
    assert [p["setting"] for p in problems] == [setting]
    assert text in problems[0]["message"]


def test_the_node_exporters_port_counts_only_where_it_is_deployed():
    assert check_settings({"tensorfold_port": 9100, "monitoring_node_exporter": False}, "h", {"monitoring": ["p"]}, BOX_DEFAULTS) == []
    assert check_settings({"tensorfold_port": 9100}, "h", {"all": ["h"]}, BOX_DEFAULTS) == []
