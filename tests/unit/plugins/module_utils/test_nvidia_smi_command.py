# -*- coding: utf-8 -*-
"""Finding and running nvidia-smi from a module: a missing or unusable program and a failing call
fail the module with what to do; peer-to-peer read from a real one-GPU host's recorded answers is
reported as unreadable with the reason, not as a failure."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi as smi
from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi_command
from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi_command import (
    P2PUnreadable, find_nvidia_smi, read_cards, read_gpu_info, read_p2p, run_nvidia_smi)

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


def gpu_query_answer(gpu_row=None):
    """gpu_info's --query-gpu call and the H200's recorded answer (gpu_info_query_mig_nh, with
    mig.mode.current; recorded before compute_mode was asked, which it lacks and reads as None);
    ``gpu_row`` replaces the answer."""
    _args, rc, out, err = recording("gpu_info_query_mig_nh")
    args = ["--query-gpu=" + ",".join(smi.GPU_QUERY_FIELDS), "--format=csv,noheader,nounits"]
    return args, rc, gpu_row if gpu_row is not None else out, err


def gpu_reads(gpu_row=None):
    """Answers of a real one-GPU host for every read gpu_info makes (no compute process)."""
    apps = ["--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader,nounits"]
    return [gpu_query_answer(gpu_row), (apps, 0, "", ""), recording("version"), recording("topo_p2p_r"),
            recording("topo_p2p_w")]


class SideBySide(FakeModule):
    """Answers a call only once every expected call is running at the same time."""

    def __init__(self, answers, parties):
        super(SideBySide, self).__init__(on_path="/usr/bin/nvidia-smi", answers=answers)
        self.barrier = threading.Barrier(parties, timeout=5)

    def run_command(self, argv, environ_update=None):
        self.ran.append((argv, environ_update))
        self.barrier.wait()  # BrokenBarrierError when the calls come one after another
        return self.answers[tuple(argv[1:])]


def test_the_reads_run_side_by_side_and_give_the_same_answer():
    # On a host without persistence mode each nvidia-smi call starts the driver (a second or more).
    module = SideBySide(gpu_reads(), parties=5)
    info = read_gpu_info(module, gpus=[0], p2p_gpus=[0, 1])
    assert len(module.ran) == 5 and all(env == {"LC_ALL": "C"} for dummy, env in module.ran)
    assert [g["name"] for g in info["gpus"]] == ["NVIDIA H200"] and info["gpus"][0]["memory_total_mib"] == 143771
    assert info["gpus"][0]["mig_mode"] == "Disabled" and "unreachable" not in info
    assert info["driver_version"] == "580.159.04" and info["cuda_version"] == "13.0"
    assert info["peer"]["skipped"] and "not on this host" in info["peer"]["msg"]


class FlakyOnce(FakeModule):
    """The first ``--version`` call raises (as a read in another thread might); the next answers."""

    def run_command(self, argv, environ_update=None):
        self.ran.append((argv, environ_update))
        if argv[1:] == ["--version"] and sum(1 for a, e in self.ran if a[1:] == ["--version"]) == 1:
            raise OSError("interrupted")
        return self.answers[tuple(argv[1:])]


def test_a_read_that_raised_beside_the_others_is_asked_again_in_the_modules_thread():
    module = FlakyOnce(on_path="/usr/bin/nvidia-smi", answers=gpu_reads())
    info = read_gpu_info(module, gpus=[0])
    assert info["cuda_version"] == "13.0"
    assert [a[1:] for a, e in module.ran].count(["--version"]) == 2
    assert not any(a[1] == "topo" for a, e in module.ran)  # peer-to-peer only when asked for


class EndsInThread(FakeModule):
    """``--version`` ends the module the way AnsibleModule.fail_json does (SystemExit), in a reader thread."""

    def run_command(self, argv, environ_update=None):
        self.ran.append((argv, environ_update))
        if argv[1:] == ["--version"]:
            raise SystemExit(1)
        return self.answers[tuple(argv[1:])]


def test_a_read_that_ended_the_module_in_its_thread_ends_it_without_asking_again():
    module = EndsInThread(on_path="/usr/bin/nvidia-smi", answers=gpu_reads())
    with pytest.raises(SystemExit):
        read_gpu_info(module, gpus=[0])
    assert [a[1:] for a, e in module.ran].count(["--version"]) == 1


class Warned(FakeModule):
    def __init__(self, answers):
        super(Warned, self).__init__(on_path="/usr/bin/nvidia-smi", answers=answers)
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)


def test_a_gpu_the_driver_cannot_reach_is_returned_apart_and_the_other_still_read():
    # nvidia-smi exits 0 with an error line for the lost card before the good row.
    good = recording("gpu_info_query_mig_nh")[2]
    module = Warned(gpu_reads("Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n" + good))
    info = read_gpu_info(module)
    assert [g["index"] for g in info["gpus"]] == [0]
    assert info["unreachable"] == [{"pci_bus_id": "0000:41:00.0", "error": "Unknown Error"}]
    assert module.warnings == ["nvidia-smi cannot reach the GPU at PCI 0000:41:00.0 (Unknown Error): it is left out "
                               "of the GPUs."]
    with pytest.raises(Failed, match=r"GPU index 1 not found: this host has 1 GPU\(s\): 0 \(NVIDIA H200\); "
                                     r"nvidia-smi cannot reach the GPU at PCI 0000:41:00.0 \(Unknown Error\)\."):
        read_gpu_info(Warned(gpu_reads("Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n"
                                       + good)), gpus=[0, 1])


def test_a_gpu_needing_a_reset_no_longer_fails_the_whole_read():
    row = "0, GPU-a, NVIDIA H200, 00000000:00:06.0, 143771, [GPU requires reset], [GPU requires reset], 9.0, " \
          "[GPU requires reset], 580.159.04, [GPU requires reset]\n"
    info = read_gpu_info(Warned(gpu_reads(row)))
    assert info["gpus"][0]["memory_used_mib"] is None
    assert info["gpus"][0]["placeholders"]["memory.used"] == "[GPU requires reset]"


class Host(object):
    """What read_cards asks of a module: nvidia-smi's place and its answer."""

    def __init__(self, binary, answer):
        self.binary, self.answer, self.asked = binary, answer, []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.binary

    def run_command(self, argv, environ_update=None):
        self.asked.append(argv)
        return self.answer


def test_read_cards_asks_nvidia_smi_once_and_gives_up_quietly():
    rows = ("0, GPU-aaaa, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 97887\n"
            "1, GPU-bbbb, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 97887\n")
    host = Host("/usr/bin/nvidia-smi", (0, rows, ""))
    cards = read_cards(host)
    assert [(c["index"], c["uuid"], c["memory_total_mib"]) for c in cards] == [(0, "GPU-aaaa", 97887), (1, "GPU-bbbb", 97887)]
    assert len(host.asked) == 1 and host.asked[0][1] == "--query-gpu=index,uuid,name,memory.total"
    assert read_cards(Host(None, None)) == []
    failing = (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert read_cards(Host("/usr/bin/nvidia-smi", failing)) == []
    assert read_cards(Host("/usr/bin/nvidia-smi", (0, "garbage, here\n", ""))) == []


LOST = "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n"


@pytest.mark.parametrize("rc", [0, 15])
def test_a_lost_gpu_is_read_apart_whatever_the_exit_status(rc):
    # nvidia-smi's manual: 15, "GPU has fallen off the bus"; the good rows are printed all the same.
    good = recording("gpu_info_query_mig_nh")[2]
    answers = gpu_reads()
    answers[0] = (answers[0][0], rc, good + LOST, "")
    module = Warned(answers)
    info = read_gpu_info(module)
    assert [g["index"] for g in info["gpus"]] == [0] and info["driver_version"] == "580.159.04"
    assert info["unreachable"] == [{"pci_bus_id": "0000:41:00.0", "error": "Unknown Error"}]
    status = [w for w in module.warnings if "exited with status" in w]
    assert status == (["nvidia-smi --query-gpu exited with status 15; what it printed is read (no message)"] if rc else [])


def test_a_corrupted_inforom_warning_is_a_warning_and_the_rows_still_read():
    good = recording("gpu_info_query_mig_nh")[2]
    answers = gpu_reads()
    answers[0] = (answers[0][0], 14, "WARNING: infoROM is corrupted at gpu 0000:00:06.0\n" + good, "")
    module = Warned(answers)
    info = read_gpu_info(module)
    assert info["gpus"][0]["name"] == "NVIDIA H200"
    assert "nvidia-smi --query-gpu: WARNING: infoROM is corrupted at gpu 0000:00:06.0" in module.warnings


@pytest.mark.parametrize("rc,out,err,said", [
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.82\n", "",
     "exit 18: the driver's libraries and the loaded kernel module are of different versions"),
    (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
     "exit 9: the NVIDIA driver is not loaded"),
    (15, "", "", "failed with exit status 15: no output"),  # nothing printed: nothing to read
    (15, "garbage\n", "", "failed with exit status 15: garbage"),
])
def test_a_failed_gpu_query_without_rows_to_read_fails_with_its_cause(rc, out, err, said):
    answers = gpu_reads()
    answers[0] = (answers[0][0], rc, out, err)
    module = Warned(answers)
    with pytest.raises(Failed):
        read_gpu_info(module)
    assert said in module.failure["msg"] and module.failure["rc"] == rc


@pytest.mark.parametrize("proc,flavour", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 18:55:19 UTC 2025\n", "proprietary"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)\n",
     "open"),
    (None, None),  # no module loaded: nothing said
])
def test_no_gpu_found_says_which_kernel_module_flavour_is_loaded(tmp_path, monkeypatch, proc, flavour):
    # The proprietary kernel module loads, but NVIDIA drives Blackwell cards only with the open one:
    # nvidia-smi then finds no GPU (exit 6), the same words as a host without a card.
    path = tmp_path / "version"
    if proc:
        path.write_text(proc)
    monkeypatch.setattr(nvidia_smi_command, "PROC_VERSION", str(path))
    answers = gpu_reads()
    answers[0] = (answers[0][0], 6, "No devices were found\n", "")
    module = Warned(answers)
    with pytest.raises(Failed):
        read_gpu_info(module)
    assert "exit 6: the driver sees no GPU" in module.failure["msg"]
    assert module.failure.get("kernel_module_flavour") == flavour


def test_a_failed_compute_apps_query_with_only_a_lost_gpu_line_reads_as_no_process():
    answers = gpu_reads()
    apps = answers[1][0]
    answers[1] = (apps, 15, LOST, "")
    info = read_gpu_info(Warned(answers))
    assert info["gpus"][0]["processes"] == []
