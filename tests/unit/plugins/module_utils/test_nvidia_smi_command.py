# -*- coding: utf-8 -*-
"""Finding and running nvidia-smi from a module: a missing or unusable program and a failing call
fail the module with what to do; peer-to-peer read from a real one-GPU host's recorded answers is
reported as unreadable with the reason, not as a failure."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi_command import (
    P2PUnreadable, find_nvidia_smi, read_p2p, run_nvidia_smi)

RECORDED = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia-smi", "h200-1gpu")


def recording(name):
    """(argv after nvidia-smi, rc, stdout, stderr) of one recorded real call."""
    def read(ext):
        with open(os.path.join(RECORDED, "%s.%s" % (name, ext))) as handle:
            return handle.read()
    return read("cmd").split()[1:], int(read("rc")), read("out"), read("err")


class Failed(Exception):
    pass


class FakeModule(object):
    """The parts of AnsibleModule these helpers use; run_command answers from recordings."""

    def __init__(self, params=None, on_path=None, answers=()):
        self.params = params or {}
        self.on_path = on_path
        self.answers = dict((tuple(args), (rc, out, err)) for args, rc, out, err in answers)
        self.ran = []
        self.failure = None

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.on_path

    def run_command(self, argv, environ_update=None):
        self.ran.append((argv, environ_update))
        return self.answers[tuple(argv[1:])]

    def fail_json(self, **kwargs):
        self.failure = kwargs
        raise Failed(kwargs["msg"])


def test_the_nvidia_smi_option_must_be_an_executable_file(tmp_path):
    plain = tmp_path / "nvidia-smi"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(Failed, match=r"nvidia-smi not found at .*nvidia-smi \(the nvidia_smi option\)"):
        find_nvidia_smi(FakeModule({"nvidia_smi": str(plain)}, on_path="/usr/bin/nvidia-smi"))
    plain.chmod(0o755)
    assert find_nvidia_smi(FakeModule({"nvidia_smi": str(plain)}, on_path="/usr/bin/nvidia-smi")) == str(plain)


def test_without_the_option_the_one_on_path_is_used_and_none_fails_with_what_to_do():
    assert find_nvidia_smi(FakeModule(on_path="/usr/bin/nvidia-smi")) == "/usr/bin/nvidia-smi"
    with pytest.raises(Failed, match="nvidia-smi is not on PATH: install the NVIDIA driver"):
        find_nvidia_smi(FakeModule(on_path=None))


def test_a_failing_call_fails_with_the_command_its_status_and_its_words():
    args, rc, out, err = recording("bad_index")
    module = FakeModule(answers=[(args, rc, out, err)])
    with pytest.raises(Failed):
        run_nvidia_smi(module, "/usr/bin/nvidia-smi", args)
    assert module.failure["msg"] == ("nvidia-smi -i 7 --query-gpu=name --format=csv failed with exit status 6 "
                                     "(exit 6: no GPU matched the selection): No devices were found")
    assert module.failure["rc"] == 6 and module.failure["cmd"] == ["/usr/bin/nvidia-smi"] + args
    assert module.ran[0][1] == {"LC_ALL": "C"}  # English output, the parsers' language


def test_a_successful_call_returns_stdout():
    args, rc, out, err = recording("list")
    assert run_nvidia_smi(FakeModule(answers=[(args, rc, out, err)]), "nvidia-smi", args) == out


def test_peer_to_peer_on_a_one_gpu_host_is_unreadable_with_the_reason():
    module = FakeModule(answers=[recording("topo_p2p_r"), recording("topo_p2p_w")])
    with pytest.raises(P2PUnreadable, match=r"peer-to-peer needs at least two GPUs: 1 selected, and this host has "
                                            r"1 GPU\(s\) \(GPU 0\)"):
        read_p2p(module, "nvidia-smi", [])
    with pytest.raises(P2PUnreadable, match=r"GPU index 1 not found: nvidia-smi lists GPU\(s\) 0\."):
        read_p2p(module, "nvidia-smi", [0, 1])
    assert module.failure is None  # unreadable is the caller's call (a warning), never a module failure


def test_a_failing_peer_to_peer_query_carries_its_details():
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    module = FakeModule(answers=[(["topo", "-p2p", "r"], 9, "", said)])
    with pytest.raises(P2PUnreadable) as raised:
        read_p2p(module, "nvidia-smi", [0, 1])
    assert "exit 9: the NVIDIA driver is not loaded" in str(raised.value)
    assert raised.value.details["rc"] == 9 and raised.value.details["cmd"] == ["nvidia-smi", "topo", "-p2p", "r"]
