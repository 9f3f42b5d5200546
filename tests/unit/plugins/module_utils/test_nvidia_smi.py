# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi as smi

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia-smi", "h200-1gpu")
UUID = "GPU-3b1f0c52-9d4e-4a71-8c2e-5f6a7b8c9d01"


def recorded(name):
    with open(os.path.join(FIXTURES, name + ".out")) as handle:
        return handle.read()


def recorded_fields(name, option):
    """The field list a recording asked for, read from its command line."""
    with open(os.path.join(FIXTURES, name + ".cmd")) as handle:
        cmd = handle.read()
    value = cmd.split(option + "=", 1)[1].split()[0]
    return tuple(value.split(","))


# --- --query-gpu ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["query_csv", "query_csv_nh"])
def test_idle_h200_reads_the_same_with_and_without_header_and_units(name):
    gpus = smi.parse_gpus(recorded(name), recorded_fields(name, "--query-gpu"))
    assert gpus == [{
        "index": 0, "uuid": UUID, "name": "NVIDIA H200", "pci_bus_id": "00000000:00:06.0",
        "memory_total_mib": 143771, "memory_used_mib": 0, "memory_free_mib": 143156,
        "compute_cap": "9.0", "power_limit_w": 700.0, "driver_version": "580.159.04",
        "mig_mode": "Disabled", "compute_mode": None, "persistence_mode": "Enabled", "placeholders": {},
    }]


def test_busy_h200_shows_the_20_gib_held():
    gpus = smi.parse_gpus(recorded("busy_query_csv_nh"), recorded_fields("busy_query_csv_nh", "--query-gpu"))
    assert gpus[0]["memory_used_mib"] == 21007
    assert gpus[0]["memory_free_mib"] == 122150


def test_the_modules_own_field_order_parses_with_units_and_placeholders():
    header = ("index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
              "compute_cap, power.limit [W], driver_version, mig.mode.current, compute_mode, persistence_mode\n")
    rows = ("0, GPU-a, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 00000000:01:00.0, 97887 MiB, "
            "2 MiB, 97250 MiB, 12.0, 400.00 W, 580.95.05, Disabled, Default, Enabled\n"
            "1, GPU-b, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 00000000:02:00.0, 97887 MiB, "
            "[N/A], [N/A], 12.0, [Not Supported], 580.95.05, [N/A], Default, Enabled\n")
    gpus = smi.parse_gpus(header + rows)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["power_limit_w"] == 400.0 and gpus[0]["mig_mode"] == "Disabled"
    assert gpus[1]["memory_used_mib"] is None
    assert gpus[1]["power_limit_w"] is None and gpus[1]["mig_mode"] is None
    assert gpus[1]["name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert gpus[1]["placeholders"] == {"memory.used": "[N/A]", "memory.free": "[N/A]",
                                       "power.limit": "[Not Supported]", "mig.mode.current": "[N/A]"}


def row(index, used="2", free="97250", power="400.00", mig="Disabled", mode="Default", persistence="Enabled"):
    """One row of gpu_info's own query (no header, no units), as nvidia-smi prints it."""
    return ("%d, GPU-%d, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 00000000:0%d:00.0, 97887, %s, %s, "
            "12.0, %s, 580.95.05, %s, %s, %s\n" % (index, index, index + 1, used, free, power, mig, mode, persistence))


@pytest.mark.parametrize("text", ["[Unknown Error]", "[Insufficient Permissions]", "[GPU requires reset]",
                                  "[GPU Lost]", "[Some Error A Later Driver Adds]"])
def test_any_bracketed_placeholder_reads_none_and_its_text_is_kept(text):
    assert smi.to_number(text) is None and smi.to_text(text) is None
    gpus = smi.parse_gpus(row(0, used=text, free=text, power=text) + row(1))
    assert gpus[0]["memory_used_mib"] is None and gpus[0]["memory_free_mib"] is None
    assert gpus[0]["placeholders"] == {"memory.used": text, "memory.free": text, "power.limit": text}
    assert gpus[1]["memory_free_mib"] == 97250 and gpus[1]["placeholders"] == {}


def test_a_gpu_that_needs_a_reset_or_is_lost_says_so_and_others_do_not():
    gpus = smi.parse_gpus(row(0, used="[GPU requires reset]", free="[GPU requires reset]") + row(1, power="[GPU is lost]")
                          + row(2, used="[Unknown Error]") + row(3))
    assert [smi.gpu_fault(g) for g in gpus] == [
        ("reset", "[GPU requires reset]"), ("lost", "[GPU is lost]"), None, None]


def test_mig_mode_is_read_and_the_older_field_list_still_reads():
    assert "mig.mode.current" in smi.GPU_QUERY_FIELDS
    assert [g["mig_mode"] for g in smi.parse_gpus(row(0, mig="Enabled") + row(1, mig="[N/A]"))] == ["Enabled", None]
    older = smi.GPU_QUERY_FIELDS[:-3]  # the list the first H200 recordings of gpu_info's query answer
    assert smi.parse_gpus(row(0).rsplit(",", 3)[0] + "\n", older)[0]["mig_mode"] is None
    assert smi.parse_gpus(row(0).rsplit(",", 3)[0] + "\n")[0]["mig_mode"] is None
    # A short row among full ones is no answer to either list: an error, not a guess.
    with pytest.raises(smi.NvidiaSmiParseError):
        smi.parse_gpus(row(0) + row(1).rsplit(",", 3)[0] + "\n")


@pytest.mark.parametrize("mode", ["Default", "Exclusive_Process", "Prohibited"])
def test_compute_mode_is_read_as_nvidia_smi_prints_it(mode):
    # nvidia-smi -c sets it; the CSV answer prints Default, Exclusive_Process or Prohibited.
    assert "compute_mode" in smi.GPU_QUERY_FIELDS
    gpus = smi.parse_gpus(row(0, mode=mode) + row(1, mode="[N/A]"))
    assert [g["compute_mode"] for g in gpus] == [mode, None]
    # The answer to the list before compute_mode was asked reads with it None.
    assert smi.parse_gpus(row(0).rsplit(",", 2)[0] + "\n")[0]["compute_mode"] is None


def test_persistence_mode_is_read_and_the_list_before_it_still_reads():
    assert smi.GPU_QUERY_FIELDS[-1] == "persistence_mode"
    gpus = smi.parse_gpus(row(0, persistence="Disabled") + row(1, persistence="[N/A]"))
    assert [g["persistence_mode"] for g in gpus] == ["Disabled", None]
    before = smi.parse_gpus(row(0, mode="Prohibited").rsplit(",", 1)[0] + "\n")[0]
    assert before["compute_mode"] == "Prohibited" and before["persistence_mode"] is None


@pytest.mark.parametrize("line,bus,error", [
    ("Unable to determine the device handle for GPU0000:41:00.0: Unknown Error", "0000:41:00.0", "Unknown Error"),
    ("Unable to determine the device handle for GPU 0000:0B:00.0: GPU is lost.  Reboot the system to recover this GPU",
     "0000:0B:00.0", "GPU is lost.  Reboot the system to recover this GPU"),
])
def test_a_gpu_the_driver_cannot_reach_is_reported_apart_and_the_others_still_read(line, bus, error):
    answer = smi.parse_gpu_answer(line + "\n" + row(0) + row(1))
    assert [g["index"] for g in answer["gpus"]] == [0, 1]
    assert answer["unreachable"] == [{"pci_bus_id": bus, "error": error}]
    apps = smi.parse_compute_apps(line + "\nGPU-0, 12, python3, 100\n")
    assert apps == [{"gpu_uuid": "GPU-0", "pid": 12, "name": "python3", "used_memory_mib": 100}]


def test_a_row_of_the_wrong_width_is_an_error_not_a_guess():
    with pytest.raises(smi.NvidiaSmiParseError):
        smi.parse_gpus("0, GPU-a, NVIDIA H200\n")


def test_a_value_that_is_no_number_is_an_error():
    with pytest.raises(smi.NvidiaSmiParseError):
        smi.to_number("lots")
    assert smi.to_number("700.00 W") == 700.0
    assert smi.to_number("143771 MiB") == 143771
    assert smi.to_number(" [Not Supported] ") is None


# --- --query-compute-apps ---------------------------------------------------------------------

def test_idle_host_prints_the_header_alone_and_has_no_apps():
    fields = recorded_fields("apps_idle", "--query-compute-apps")
    assert smi.parse_compute_apps(recorded("apps_idle"), fields) == []
    assert smi.parse_compute_apps("", fields) == []


@pytest.mark.parametrize("name", ["busy_apps", "busy_apps_nh"])
def test_busy_host_lists_the_process_with_its_memory(name):
    fields = recorded_fields(name, "--query-compute-apps")
    apps = smi.parse_compute_apps(recorded(name), fields)
    assert apps == [{"gpu_uuid": UUID, "pid": 473, "name": "python3", "used_memory_mib": 20998}]


@pytest.mark.parametrize("name", ["/opt/x,y/bin/python", "ray::IDLE, worker,1", "a,,b"])
def test_a_process_name_with_commas_keeps_its_own_text(name):
    apps = smi.parse_compute_apps("GPU-a, 12, %s, 100\n" % name)
    assert apps == [{"gpu_uuid": "GPU-a", "pid": 12, "name": name, "used_memory_mib": 100}]


def test_busy_gpu_is_reported_with_its_process():
    gpus = smi.parse_gpus(recorded("busy_query_csv_nh"), recorded_fields("busy_query_csv_nh", "--query-gpu"))
    apps = smi.parse_compute_apps(recorded("busy_apps_nh"), recorded_fields("busy_apps_nh", "--query-compute-apps"))
    smi.attach_processes(gpus, apps)
    assert gpus[0]["processes"] == [{"pid": 473, "name": "python3", "used_memory_mib": 20998}]


def test_selecting_gpus_keeps_rank_order_and_names_the_missing_index():
    gpus = [{"index": 0}, {"index": 1}]
    assert smi.select_gpus(gpus, [1, 0]) == [{"index": 1}, {"index": 0}]
    assert smi.select_gpus(gpus, []) == gpus
    with pytest.raises(KeyError) as err:
        smi.select_gpus(gpus, [0, 7])
    assert err.value.args[0] == [7]


# --- topo -p2p --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["topo_p2p_r", "topo_p2p_w", "topo_p2p_n", "topo_p2p_a"])
def test_one_gpu_matrix_with_ansi_header_has_no_pairs(name):
    text = recorded(name)
    assert "\x1b[4m" in text
    assert smi.parse_p2p_matrix(text) == {}
    assert smi.parse_legend(text)["CNS"] == "Chipset not supported"


LEGEND = """
Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  U    = Unknown
"""


def two_gpu_matrix(status, sep="\t", title=False, legend=LEGEND):
    head = " %s\x1b[4mGPU0%sGPU1%s\x1b[0m\n" % (sep, sep, sep)
    rows = " GPU0%sX%s%s%s\n GPU1%s%s%sX%s\n" % (sep, sep, status, sep, sep, status, sep, sep)
    return ("P2P Connectivity Matrix\n" if title else "") + head + rows + legend


@pytest.mark.parametrize("status", ["OK", "CNS", "NS", "TNS", "GNS", "U", "DR"])
@pytest.mark.parametrize("sep", ["\t", "   "])
@pytest.mark.parametrize("title", [False, True])
def test_two_gpu_matrices_read_every_status(status, sep, title):
    matrix = smi.parse_p2p_matrix(two_gpu_matrix(status, sep, title))
    assert matrix == {(0, 1): status, (1, 0): status}


def test_newer_legend_defines_dr():
    text = two_gpu_matrix("DR", legend=LEGEND + "  DR   = Disabled by regkey\n")
    assert smi.parse_legend(text)["DR"] == "Disabled by regkey"
    warning = smi.p2p_warning({"0-1": "DR", "1-0": "DR"}, {"0-1": "DR", "1-0": "DR"}, smi.parse_legend(text))
    assert "read DR (Disabled by regkey)" in warning


def test_plain_space_matrix_without_escapes():
    text = "        GPU0    GPU1    GPU2\n GPU0   X       OK      CNS\n GPU1   OK      X       OK\n GPU2   CNS     OK      X\n"
    matrix = smi.parse_p2p_matrix(text)
    assert matrix[(0, 2)] == "CNS"
    assert smi.pair_statuses(matrix, [2, 1]) == {"2-1": "OK", "1-2": "OK"}
    assert smi.pair_statuses(matrix, [0, 2]) == {"0-2": "CNS", "2-0": "CNS"}


def test_a_gpu_missing_from_the_matrix_reads_unknown():
    matrix = smi.parse_p2p_matrix(two_gpu_matrix("OK"))
    assert smi.pair_statuses(matrix, [0, 3]) == {"0-3": "U", "3-0": "U"}


def test_a_ragged_matrix_row_is_an_error():
    with pytest.raises(smi.NvidiaSmiParseError):
        smi.parse_p2p_matrix(" \tGPU0\tGPU1\n GPU0\tX\n")


def test_text_without_a_matrix_is_an_error():
    with pytest.raises(smi.NvidiaSmiParseError):
        smi.parse_p2p_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")


def test_cards_without_peer_to_peer_are_not_blamed_on_the_platform():
    gns = {"0-1": "GNS", "1-0": "GNS"}
    text = smi.p2p_warning(gns, gns)
    assert text.startswith("[W_P2P] these cards do not support peer-to-peer")
    assert "IOMMU" not in text and "BIOS" not in text
    mixed = smi.p2p_finding({"0-1": "GNS", "1-0": "CNS"}, gns)
    assert "IOMMU/ACS" in mixed[0] and mixed[1] is None  # a chipset status too: the platform's advice


def test_p2p_warning_names_each_pair_and_is_none_when_all_ok():
    ok = {"0-1": "OK", "1-0": "OK"}
    assert smi.p2p_warning(ok, ok) is None
    text = smi.p2p_warning({"0-1": "CNS", "1-0": "CNS"}, {"0-1": "CNS", "1-0": "OK"})
    assert text.startswith("[W_P2P] ")
    assert "GPU 0 -> GPU 1: read CNS (Chipset not supported), write CNS" in text
    assert "GPU 1 -> GPU 0: read CNS (Chipset not supported), write OK" in text


# --- versions ---------------------------------------------------------------------------------

def test_cuda_and_driver_from_the_version_recording():
    text = recorded("version")
    assert smi.parse_cuda_version(text) == "13.0"
    assert smi.parse_driver_version(text) == "580.159.04"


def test_cuda_and_driver_from_the_banner_recording():
    text = recorded("smi")
    assert smi.parse_cuda_version(text) == "13.0"
    assert smi.parse_driver_version(text) == "580.159.04"


def test_610_series_banner_names_kmd_and_cuda_umd_versions():
    banner = ("| NVIDIA-SMI 610.12.01          KMD Version: 610.12.01      CUDA UMD Version: 13.2     |\n")
    assert smi.parse_cuda_version(banner) == "13.2"
    assert smi.parse_driver_version(banner) == "610.12.01"


def test_no_cuda_version_reads_none():
    assert smi.parse_cuda_version("NVIDIA-SMI version  : 580.159.04\n") is None


def test_driver_versions_compare_numerically():
    assert smi.version_at_least("580.159.04", "580")
    assert smi.version_at_least("610.12.01", "580")
    assert not smi.version_at_least("575.64.05", "580")
    assert not smi.version_at_least(None, "580")
    assert smi.version_tuple("580.159.04") == (580, 159, 4)


def test_the_table_lists_the_gpus_of_a_one_gpu_host():
    assert smi.parse_p2p_table(recorded("topo_p2p_r")) == ([0], {})


def test_failure_text_carries_command_exit_status_and_message():
    text = smi.command_failure(["nvidia-smi", "-i", "7"], 6, recorded("bad_index"), "")
    assert text == "nvidia-smi -i 7 failed with exit status 6 (exit 6: no GPU matched the selection): No devices were found"
    assert "is not a valid field" in smi.command_failure(["nvidia-smi"], 2, recorded("bad_field"), "")
    # No selection: exit 6 means the driver sees no GPU at all.
    assert smi.command_failure(["nvidia-smi", "--query-gpu=name"], 6, "No devices were found", "") == (
        "nvidia-smi --query-gpu=name failed with exit status 6 (exit 6: the driver sees no GPU): No devices were found")


@pytest.mark.parametrize("rc,out,err,what", [
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.82", "",
     "different versions"),
    (255, "Failed to initialize NVML: Driver/library version mismatch", "", "different versions"),  # the words alone
    (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "not loaded"),
    (12, "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", "", "NVML library"),
])
def test_driver_failures_are_told_apart_from_card_failures(rc, out, err, what):
    assert what in smi.driver_failure(rc, out, err)[0]
    assert what in smi.command_failure(["nvidia-smi"], rc, out, err)


LOST_LINE = "Unable to determine the device handle for GPU0000:41:00.0: GPU is lost"


@pytest.mark.parametrize("rc,out", [(6, "No devices were found"), (15, LOST_LINE), (2, "")])
def test_card_failures_are_no_driver_failure(rc, out):
    assert smi.driver_failure(rc, out, "") is None


@pytest.mark.parametrize("value,mib", [("97887 MiB", 97887), ("95.59 GiB", 97884.16), ("96 GiB", 98304),
                                       ("1048576 KiB", 1024), ("12", 12)])
def test_memory_in_another_unit_reads_in_mib(value, mib):
    assert smi.to_number(value) == pytest.approx(mib)


@pytest.mark.parametrize("name", ["gpu_info_query_mig", "gpu_info_query_mig_nh"])
def test_the_gpu_info_modules_query_as_recorded_on_the_h200(name):
    # The field list gpu_info asked with MIG mode, answered by a real H200; compute_mode and
    # persistence_mode, asked since, are the fields it lacks.
    assert recorded_fields(name, "--query-gpu") + ("compute_mode", "persistence_mode") == smi.GPU_QUERY_FIELDS
    assert smi.parse_gpus(recorded(name)) == [{
        "index": 0, "uuid": "GPU-d2f52e65-61cf-7ab6-ae85-f7bf96a0c6a3", "name": "NVIDIA H200",
        "pci_bus_id": "00000000:00:06.0", "memory_total_mib": 143771, "memory_used_mib": 0,
        "memory_free_mib": 143156, "compute_cap": "9.0", "power_limit_w": 700.0, "driver_version": "580.159.04",
        "mig_mode": "Disabled", "compute_mode": None, "persistence_mode": None, "placeholders": {},
    }]


@pytest.mark.parametrize("name", ["gpu_info_query", "gpu_info_query_nh"])
def test_the_gpu_info_modules_query_before_mig_mode_as_recorded_on_the_h200(name):
    # Recorded before mig.mode.current, compute_mode and persistence_mode were asked (the fields added
    # since); the H200's MIG mode is in the query_csv recordings. The parser reads each list's answer.
    assert recorded_fields(name, "--query-gpu") + smi.OPTIONAL_GPU_FIELDS == smi.GPU_QUERY_FIELDS
    gpus = smi.parse_gpus(recorded(name))
    assert gpus == [{
        "index": 0, "uuid": "GPU-b52f4189-5e10-3862-c8b5-0e9447d38f9f", "name": "NVIDIA H200",
        "pci_bus_id": "00000000:00:06.0", "memory_total_mib": 143771, "memory_used_mib": 0,
        "memory_free_mib": 143156, "compute_cap": "9.0", "power_limit_w": 700.0, "driver_version": "580.159.04",
        "mig_mode": None, "compute_mode": None, "persistence_mode": None, "placeholders": {},
    }]
