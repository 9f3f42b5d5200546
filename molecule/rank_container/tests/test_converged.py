"""What converge and the idempotence run left on the box (Molecule's testinfra verifier runs this
file; the runs an operator makes afterwards are in ../verify.yml). Converge asked for a
1,048,576-token window the card refuses, then started once at the computed 173,056 tokens."""

import json

testinfra_hosts = ["gpu_hosts"]

STATE = "/srv/glm53/.state"
LOGS = "/srv/glm53/logs"

# Runs in the box: one request to the engine's API, with the key read from its 0600 file (so the
# key is on no command line), printing the status, the WWW-Authenticate header and the body.
REQUEST = r"""
import json, sys, urllib.error, urllib.request
path, with_key, body = sys.argv[1], sys.argv[2] == "key", sys.argv[3]
req = urllib.request.Request("http://127.0.0.1:8020" + path, data=body.encode() or None)
if body:
    req.add_header("Content-Type", "application/json")
if with_key:
    req.add_header("Authorization", "Bearer " + open("/srv/glm53/.state/api-key").read().strip())
try:
    r = urllib.request.urlopen(req, timeout=30)
except urllib.error.HTTPError as e:
    r = e
print(json.dumps({"status": r.status, "www_authenticate": r.headers.get("WWW-Authenticate"),
                  "body": r.read().decode()}))
"""

# Runs in the box: how many places hold the key (docker inspect of the container, and every
# process's command line), reading the key from its file so that this check holds it nowhere.
KEY_SIGHTINGS = r"""
import glob, json, subprocess
key = open("/srv/glm53/.state/api-key").read().strip().encode()
cmdlines = 0
for path in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        cmdlines += key in open(path, "rb").read()
    except OSError:
        pass
inspect = subprocess.run(["docker", "inspect", "glm53-zig"], capture_output=True, check=True).stdout
print(json.dumps({"docker inspect": key in inspect, "command lines": cmdlines}))
"""


def api(host, path, key=False, body=""):
    return json.loads(host.check_output("python3 -c %s %s %s %s", REQUEST, path, "key" if key else "none", body))


def container(host):
    return host.docker("glm53-zig").inspect()


def test_the_container_runs_with_our_label_and_settings_at_the_computed_window(host):
    c = container(host)
    assert c["State"]["Running"]
    assert c["Config"]["Labels"]["glm53.tensorfold.rank_container"] == "true"
    assert c["Config"]["Labels"]["glm53.tensorfold.rank_container.context"] == "173056"
    hc = c["HostConfig"]
    assert (hc["Init"], hc["IpcMode"], hc["NetworkMode"]) == (True, "host", "host")
    assert hc["ShmSize"] == 16 * 2**30
    assert hc["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert "HF_HUB_OFFLINE=1" in c["Config"]["Env"]


def test_the_weights_drafter_and_key_are_mounted_read_only_and_the_run_folder_writable(host):
    mounts = {m["Destination"]: (m["Source"], m["RW"]) for m in container(host)["Mounts"]}
    assert mounts["/model"] == ("/srv/glm53/model", False)
    assert mounts["/drafter"] == ("/srv/glm53/drafter", False)
    assert mounts["/run/tensorfold/api-key"] == (STATE + "/api-key", False)
    source, writable = mounts["/logs"]
    assert source.startswith(LOGS + "/") and writable


def test_the_key_file_is_root_only_and_the_runner_script_executable(host):
    key = host.file(STATE + "/api-key")
    assert (key.is_file, key.user, key.mode) == (True, "root", 0o600)
    runner = host.file(LOGS + "/current/runner.sh")
    assert runner.is_file and runner.mode == 0o755


def test_health_answers_without_a_key_with_only_its_status(host):
    assert api(host, "/health") == {"status": 200, "www_authenticate": None, "body": '{"status":"ok"}'}


def test_models_without_a_key_get_the_engines_401(host):
    got = api(host, "/v1/models")
    assert (got["status"], got["www_authenticate"]) == (401, "Bearer")
    assert json.loads(got["body"]) == {"error": {
        "message": "A valid API key is required", "type": "invalid_request_error",
        "param": None, "code": "invalid_api_key"}}


def test_a_chat_request_with_the_key_gets_a_reply(host):
    body = {"model": "GLM-5.3-Flash", "temperature": 0, "max_tokens": 16,
            "messages": [{"role": "user", "content": "Hello"}]}
    got = api(host, "/v1/chat/completions", key=True, body=json.dumps(body))
    assert got["status"] == 200
    assert json.loads(got["body"])["choices"][0]["message"]["content"]


def test_the_context_fit_cache_holds_the_one_computed_window(host):
    rows = [line.split("\t") for line in host.file(STATE + "/context-fit.tsv").content_string.splitlines()
            if not line.startswith("#")]
    assert [row[1] for row in rows] == ["173056"]


def test_two_starts_so_far_and_the_first_was_refused_for_memory(host):
    runs = sorted(host.check_output("find %s -mindepth 1 -maxdepth 1 -type d", LOGS).split())
    assert len(runs) == 2
    refused = host.file(runs[0] + "/rank0.log").content_string
    assert ("tensorfold: the CUDA memory budget fits no stream: one at a 1048576-token window takes 8.00 GiB,"
            " and 5.30 GiB is left") in refused


def test_the_key_is_neither_in_docker_inspect_nor_on_any_command_line(host):
    assert json.loads(host.check_output("python3 -c %s", KEY_SIGHTINGS)) == {"docker inspect": False, "command lines": 0}
