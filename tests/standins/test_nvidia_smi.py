"""The stand-in nvidia-smi (tests/standins/nvidia-smi) answers in the recorded shapes.

Each test runs the stand-in the way the modules do and checks that the collection's parsers read
it to the same shape as the real recording of the same command.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STANDIN = os.path.join(ROOT, "tests", "standins", "nvidia-smi")
FIXTURES = os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "nvidia-smi", "h200-1gpu")
sys.path.insert(0, os.path.join(ROOT, "plugins", "module_utils"))
import nvidia_smi as smi  # noqa: E402  (pure module, importable without the collection path)

H200 = {"model": "NVIDIA H200", "count": 1, "memory_total_mib": 143771, "memory_used_mib": 0,
        "memory_reserved_mib": 616, "compute_cap": "9.0", "power_limit_w": 700,
        "power_default_limit_w": 700, "driver_version": "580.159.04", "cuda_version": "13.0",
        # the recorded card's identity and NVML's free figure (total - used - reserved + 1 there)
        "gpus": [{"uuid": "GPU-3b1f0c52-9d4e-4a71-8c2e-5f6a7b8c9d01", "pci_bus_id": "00000000:00:06.0",
                  "memory_free_mib": 143156}]}


def recorded(name, ext="out"):
    with open(os.path.join(FIXTURES, "%s.%s" % (name, ext))) as handle:
        return handle.read()


def recorded_args(name):
    return recorded(name, "cmd").split()[1:]


@pytest.fixture
def run(tmp_path):
    def _run(profile, args):
        path = tmp_path / "profile.json"
        path.write_text(json.dumps(profile))
        env = dict(os.environ, GLM53_SIM_GPU_PROFILE=str(path))
        proc = subprocess.run(["/usr/bin/python3", STANDIN] + list(args), env=env,
                              capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout
    return _run


@pytest.mark.parametrize("name", ["query_csv", "query_csv_nh"])
def test_h200_profile_reproduces_the_recorded_query_gpu(run, name):
    args = recorded_args(name)
    rc, out = run(H200, args)
    fields = tuple(args[0].split("=", 1)[1].split(","))
    assert rc == 0
    if name == "query_csv":
        assert out.splitlines()[0] == recorded(name).splitlines()[0]  # the header, units and all
    assert smi.parse_gpus(out, fields) == smi.parse_gpus(recorded(name), fields)


@pytest.mark.parametrize("name", ["apps_idle", "busy_apps", "busy_apps_nh"])
def test_compute_apps_have_the_recorded_shape(run, name):
    args = recorded_args(name)
    fields = tuple(args[0].split("=", 1)[1].split(","))
    profile = dict(H200)
    if name.startswith("busy"):
        profile.update(memory_used_mib=21007, apps=[{"gpu": 0, "pid": 473, "name": "python3", "used_memory_mib": 20998}])
    rc, out = run(profile, args)
    assert rc == 0
    want = smi.parse_compute_apps(recorded(name), fields)
    got = smi.parse_compute_apps(out, fields)
    assert [dict(a, gpu_uuid=None) for a in got] == [dict(a, gpu_uuid=None) for a in want]
    if name == "busy_apps":
        assert out.splitlines()[0] == recorded(name).splitlines()[0]


@pytest.mark.parametrize("name", ["bad_index", "bad_field"])
def test_errors_have_the_recorded_exit_status_and_words(run, name):
    rc, out = run(H200, recorded_args(name))
    assert rc == int(recorded(name, "rc"))
    assert out == recorded(name)


@pytest.mark.parametrize("kind", ["r", "w", "n"])
def test_one_gpu_topology_is_byte_for_byte_the_recording(run, kind):
    rc, out = run(H200, ["topo", "-p2p", kind])
    assert (rc, out) == (0, recorded("topo_p2p_" + kind))


def test_two_card_matrix_carries_each_pairs_status_per_direction(run):
    profile = {"count": 2, "p2p": {"read": {"0-1": "OK", "1-0": "CNS"}, "write": "NS"}}
    _rc, read = run(profile, ["topo", "-p2p", "r"])
    _rc, write = run(profile, ["topo", "-p2p", "w"])
    assert "\x1b[4mGPU0\tGPU1\t\x1b[0m" in read
    assert smi.parse_p2p_matrix(read) == {(0, 1): "OK", (1, 0): "CNS"}
    assert smi.parse_p2p_matrix(write) == {(0, 1): "NS", (1, 0): "NS"}


def test_version_and_banner_give_the_same_versions_as_the_recordings(run):
    _rc, version = run(H200, ["--version"])
    assert version == recorded("version")
    _rc, banner = run(H200, [])
    assert smi.parse_cuda_version(banner) == "13.0"
    assert smi.parse_driver_version(banner) == "580.159.04"


def test_list_names_each_card(run):
    _rc, out = run({"count": 2}, ["-L"])
    assert out.startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Workstation Edition (UUID: GPU-")
    assert len(out.splitlines()) == 2


def test_the_modules_queries_read_a_busy_rtx_pro_6000_box(run):
    profile = {"count": 2, "memory_used_mib": [20482, 2], "apps": [{"gpu": 0, "pid": 99, "name": "python3", "used_memory_mib": 20480}]}
    _rc, out = run(profile, ["--query-gpu=" + ",".join(smi.GPU_QUERY_FIELDS), "--format=csv,noheader,nounits"])
    gpus = smi.parse_gpus(out)
    _rc, apps = run(profile, ["--query-compute-apps=" + ",".join(smi.APP_QUERY_FIELDS), "--format=csv,noheader,nounits"])
    smi.attach_processes(gpus, smi.parse_compute_apps(apps))
    assert gpus[0]["memory_used_mib"] == 20482 and gpus[0]["memory_free_mib"] == 97887 - 20482
    assert gpus[0]["processes"] == [{"pid": 99, "name": "python3", "used_memory_mib": 20480}]
    assert gpus[1]["processes"] == [] and gpus[1]["power_limit_w"] == 400.0


def test_the_compute_mode_reads_per_card_as_nvidia_smi_prints_it(run):
    profile = {"count": 2, "compute_mode": ["Exclusive_Process", "Prohibited"]}
    _rc, out = run(profile, ["--query-gpu=" + ",".join(smi.GPU_QUERY_FIELDS), "--format=csv,noheader,nounits"])
    assert [g["compute_mode"] for g in smi.parse_gpus(out)] == ["Exclusive_Process", "Prohibited"]
    _rc, out = run({"count": 1}, ["--query-gpu=index,compute_mode", "--format=csv"])
    assert out == "index, compute_mode\n0, Default\n"


def test_the_persistence_mode_reads_per_card_as_the_h200_recording_prints_it(run):
    _rc, out = run({"count": 2, "persistence_mode": ["Disabled"]}, ["--query-gpu=" + ",".join(smi.GPU_QUERY_FIELDS),
                                                                   "--format=csv,noheader,nounits"])
    assert [g["persistence_mode"] for g in smi.parse_gpus(out)] == ["Disabled", "Enabled"]


@pytest.mark.parametrize("text", [
    # as a person writes a profile: indented, on several lines, a final newline
    json.dumps(H200, indent=2) + "\n",
    # values JSON has and Python spells otherwise
    json.dumps(dict(H200, p2p={"read": "OK", "write": {"0-1": "CNS"}}, apps=[], mig_mode=None)),
])
def test_the_profile_reads_as_json_reads_it(tmp_path, text):
    """The stand-in reads its profile without the json module where it can: the same answer."""
    path = tmp_path / "profile.json"
    path.write_text(text)
    env = dict(os.environ, GLM53_SIM_GPU_PROFILE=str(path))
    program = ("import runpy, json, sys; standin = runpy.run_path(sys.argv[1]); "
               "print(standin['load_profile']() == json.loads(open(sys.argv[2]).read()))")
    proc = subprocess.run(["/usr/bin/python3", "-c", program, STANDIN, str(path)], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.stdout.strip() == "True", proc.stderr


def test_a_broken_profile_fails_with_json_s_own_message(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text('{"model": "NVIDIA H200", "count": 1,}')
    env = dict(os.environ, GLM53_SIM_GPU_PROFILE=str(path))
    proc = subprocess.run(["/usr/bin/python3", STANDIN, "-L"], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "JSONDecodeError" in proc.stderr, proc.stderr


MEMO = os.path.join(ROOT, "tests", "standins", "nvidia-smi-memo")


def test_the_memo_answers_as_the_stand_in_then_from_its_record(tmp_path):
    """The bench's light boxes' nvidia-smi: every command's output and exit status are the
    stand-in's, the first time and from the record afterwards (the stand-in gone by then)."""
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(H200))
    standin = tmp_path / "standin"
    standin.write_text("#!/bin/sh\nexec /usr/bin/python3 %s \"$@\"\n" % STANDIN)
    standin.chmod(0o755)
    env = dict(os.environ, GLM53_SIM_GPU_PROFILE=str(profile), GLM53_SIM_SMI_MEMO=str(tmp_path / "memo"),
               GLM53_SIM_SMI_STANDIN=str(standin))
    commands = [recorded_args(name) for name in ("query_csv", "query_csv_nh", "bad_index", "bad_field")] + [["--version"]]

    def answers(program):
        return [subprocess.run([program] + args, env=env, capture_output=True, text=True, check=False)
                for args in commands]

    want = [(proc.returncode, proc.stdout) for proc in answers(str(standin))]
    assert [(proc.returncode, proc.stdout) for proc in answers(MEMO)] == want
    assert sorted(want)[0][0] == 0 and sorted(want)[-1][0] != 0  # answers and failures alike
    standin.write_text("#!/bin/sh\nexit 99\n")
    assert [(proc.returncode, proc.stdout) for proc in answers(MEMO)] == want
