# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Is a box already what the run wants? One comparison of what it has with what is wanted.

The parts compared, each named in the result when it differs:
``record`` (the box has the record of a completed deploy, written after its smoke test passed,
and the run's settings fingerprint equals the one recorded; see ``read_record``),
``container`` (ours, running), ``settings`` (the fingerprint label rank_container put on it),
``image`` (the wanted reference is present and is what the container runs), ``weights`` (every
planned file of every repository has a verification record that still holds: same revision,
size and mtime, as hf_snapshot writes them), ``health`` (the API answers /health) and
``runtime`` (Docker has the runtime the container needs) and ``api_key`` (the key file the
container reads holds the run's key). Apart from those, ``node_exporter_state`` says whether the
box's node exporter (monitoring's part of a deploy) serves the collection's textfile series; it
does not count toward ``converged``: site.yml's monitoring step uses it alone. ``read_box`` reads the
box and compares; everything else here is pure apart from reading the weights' small state files.

Only the standard library and READER_MODULES: the fast path's action runs ``read_box`` on the box
with the box's python3 and no AnsiballZ (plugin_utils/box_reader.py), which costs the box a quarter of
a module run; the converged_info module runs the same function where that cannot be done.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args, engine_log, hf_plan, hf_records
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.health import health_ok
from ansible_collections.glm53.tensorfold.plugins.module_utils.net import http_get, quote, unix_get

PARTS = ("record", "container", "settings", "api_key", "image", "weights", "runtime", "health")
RECORD = "deployed.json"
# Written by the monitoring role once the node exporter serves (its URL on the box).
NODE_EXPORTER_RECORD = "node-exporter.json"
# Every module_utils file read_box imports, itself included: what the box needs to run it.
READER_MODULES = ("converged", "codes", "engine_args", "engine_log", "health", "hf_plan", "hf_records", "net")


class ReadFailure(Exception):
    """The box could not be read (its Docker engine does not answer): ``code`` and the message."""

    def __init__(self, msg, code):
        super(ReadFailure, self).__init__(msg)
        self.code = code


def read_box(params):
    """converged_info's answer for ``params`` (its options, defaults filled in): the box read and
    compared with what the run wants. Raises ReadFailure when Docker cannot be read."""
    params = dict(params)
    record, served_now, key_matches = None, {}, None
    if params["data_dir"]:
        state_dir = os.path.join(params["data_dir"], ".state")
        record = read_record(state_dir)
        wants = record_wants(record or {}, params["run_settings"] or "")
        for name in ("settings_hash", "image", "health_url"):
            params[name] = params[name] or wants[name]
        params["weights"] = params["weights"] or wants["weights"]
        key = read_text(os.path.join(state_dir, "api-key"))
        key_matches = engine_args.api_key_file_holds(key, params["api_key"]) if params["api_key"] else key is None
        served_now = served(read_text(os.path.join(params["data_dir"], "logs", "current", "rank0.log")))
    have = {"container": None, "image": None, "runtimes": None, "health": None,
            "weights": [weights_state(repo) for repo in params["weights"]]}
    try:
        docker = DockerReader(params["docker_host"], params["docker_timeout"])
        have["container"] = container_facts(docker.container(params["container_name"]), params["label"])
        if params["image"]:
            have["image"] = image_facts(docker.image(params["image"]))
        if params["runtime"]:
            have["runtimes"] = docker.runtimes()
    except (IOError, OSError, ValueError) as exc:
        raise ReadFailure(problem("E_DOCKER", params["host_label"] or os.uname().nodename,
                                  "cannot read the Docker engine at %s: %s" % (params["docker_host"], exc)), "E_DOCKER")
    if params["health_url"] and have["container"] and have["container"]["running"]:
        have["health"] = read_health(params["health_url"], params["health_timeout"], body_ok=health_ok)
    have["api_key_matches"] = key_matches
    want = {"settings_hash": params["settings_hash"], "image": params["image"], "runtime": params["runtime"],
            "weights": params["weights"], "health": bool(params["health_url"])}
    if params["data_dir"]:
        want.update(run_settings=params["run_settings"] or "", recorded_settings=(record or {}).get("settings"))
    differs = compare(want, have)
    exporter = None
    if params["node_exporter"] and params["data_dir"]:
        exporter = node_exporter_state(read_node_exporter_record(os.path.join(params["data_dir"], ".state")),
                                       params["data_dir"], params["health_timeout"])
    published = stands_for(record, served_now, params["data_dir"]) if params["data_dir"] and not differs else None
    return dict(changed=False, converged=not differs, differs=differs, lacks=lacks(want, differs),
                verified_weights=verified_weights(params["weights"], have["weights"]),
                summary=summary(differs), have=have, served=served_now, record=record,
                node_exporter=exporter, published=published)


def read_text(path):
    """A small state file's text, or None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _load_json(path):
    try:
        return json.loads(read_text(path) or "")
    except ValueError:
        return None


def weights_state(repo):
    """What the box has of one repository: every planned file with a verification record that
    still holds (hf_snapshot's ``listing-COMMIT.json`` and ``verified.json`` in its state folder).
    No file is read beyond those two; a file whose size or mtime changed since it was hashed
    counts as unverified. ``repo``: name, revision, local_dir, state_dir, allow_patterns."""
    state_dir, revision = repo["state_dir"], repo["revision"]
    state = {"name": repo.get("name") or os.path.basename(repo["local_dir"].rstrip("/")),
             "revision": revision, "files": 0, "unverified": [], "listing": False}
    if not hf_plan.is_pinned(revision):
        state["problem"] = "revision %r is not pinned, so no recorded state can prove it" % revision
        return state
    listing, records = hf_records.recorded_state(state_dir, revision)
    if not listing or listing.get("commit") != revision or "entries" not in listing:
        state["problem"] = "no file listing recorded for %s" % revision[:12]
        return state
    state["listing"] = True
    records = records or {}
    files = hf_plan.plan_files(listing["entries"], repo.get("allow_patterns") or None)
    state["files"] = len(files)
    for spec in files:
        try:
            st = os.stat(os.path.join(repo["local_dir"], spec["path"]))
        except OSError:
            state["unverified"].append(spec["path"])
            continue
        if not hf_plan.is_verified(records, revision, spec, st.st_size, st.st_mtime_ns):
            state["unverified"].append(spec["path"])
    if not files:
        state["problem"] = "the listing has no file to serve"
    return state


def read_record(state_dir):
    """The record of the last completed deploy (``STATE/deployed.json``), or None.

    Written after the smoke test passed in a full run: ``settings`` (the run's settings
    fingerprint), ``container`` (the settings label the engine container got), ``image`` (the
    reference it runs), ``endpoint`` and ``weights`` (the repositories as weights_fetch planned
    them). A converged box is one on which all of that still holds."""
    data = _load_json(os.path.join(state_dir, RECORD))
    if not isinstance(data, dict) or not data.get("settings") or not data.get("container"):
        return None
    return data


def record_wants(record, run_settings):
    """What the run wants of a box, from its deploy record: the comparison's ``want``."""
    endpoint = (record.get("endpoint") or "").rstrip("/")
    if endpoint.endswith("/v1"):
        endpoint = endpoint[:-3]
    return {"run_settings": run_settings, "recorded_settings": record.get("settings"),
            "settings_hash": record.get("container"), "image": record.get("image") or None,
            "weights": record.get("weights") or [],
            "health_url": (endpoint + "/health") if endpoint else None}


def served(rank0_log):
    """Context window and streams of the running engine, from its startup line in rank0.log."""
    streams, window = engine_log.parse_startup(rank0_log)
    return {"context": window, "streams": streams}


def stands_for(record, served, data_dir):
    """What a converged box stands for in the run: the facts its skipped steps would have set
    (rank_container, smoke_test, gpu_host_checks, tensorfold_image, weights_fetch), from its deploy
    record. The controller's readers of those facts (plugin_utils/hostvars.py) take them from here
    for a box the fast path found converged, so the box pays no task to set them."""
    record = record or {}
    endpoint = record.get("endpoint")
    return {
        "tensorfold_image_ref": record.get("image"),
        "tensorfold_image_tag": record.get("image_tag") or "",
        "weights_fetch_model_revision": record.get("revision") or "",
        "rank_container_result": {"status": "running", "endpoint": endpoint, "context": (served or {}).get("context"),
                                  "streams": (served or {}).get("streams"), "starts": 0,
                                  "log_dir": "%s/logs/current" % data_dir, "warnings": []},
        "gpu_host_checks_result": record.get("checks") or {},
        "smoke_test_result": {"status": "live", "endpoint": record.get("public_endpoint") or endpoint, "problems": []},
    }


def container_facts(inspect, label):
    """The few facts of ``docker inspect CONTAINER`` the comparison needs (None: no container)."""
    if not inspect:
        return None
    labels = (inspect.get("Config") or {}).get("Labels") or {}
    state = inspect.get("State") or {}
    return {
        "id": inspect.get("Id", ""), "name": (inspect.get("Name") or "").lstrip("/"),
        "image_id": inspect.get("Image", ""), "image_ref": (inspect.get("Config") or {}).get("Image", ""),
        "running": bool(state.get("Running")), "status": state.get("Status", ""),
        "ours": labels.get(label) == "true", "settings": labels.get(label + ".settings", ""),
    }


def image_facts(inspect):
    if not inspect:
        return None
    return {"id": inspect.get("Id", ""), "tags": inspect.get("RepoTags") or []}


def compare(want, have):
    """Differences between ``want`` and ``have``; an empty list means converged.

    want: settings_hash, image, runtime (each optional: None is not compared), weights (list of
    repositories, possibly empty), health (bool: whether /health is part of the comparison);
    with a deploy record also run_settings and recorded_settings (see record_wants).
    have: container (container_facts or None), image (image_facts or None), weights (list of
    weights_state), runtimes (list of names, or None when not read), health ({ok, status, error}
    or None when not asked), api_key_matches (bool, or None when not compared).
    Returns a list of {part, what}, in PARTS order, at most one entry per part.
    """
    differs = {}
    if "run_settings" in want:
        if not want.get("recorded_settings"):
            differs["record"] = "no record of a completed deploy on the box"
        elif want["recorded_settings"] != want["run_settings"]:
            differs["record"] = "the run's settings fingerprint %s differs from the deployed one %s" % (
                (want["run_settings"] or "(none)")[:12], want["recorded_settings"][:12])
    if have.get("api_key_matches") is False:
        differs["api_key"] = "the key file the engine reads does not hold the run's API key"
    container = have.get("container")
    if container is None:
        differs["container"] = "no container named as wanted"
    elif not container["ours"]:
        differs["container"] = "the container %s is not ours (no rank_container label)" % container["name"]
    elif not container["running"]:
        differs["container"] = "the container is %s, not running" % (container["status"] or "stopped")
    if want.get("settings_hash") is not None and container is not None and container["ours"]:
        if container["settings"] != want["settings_hash"]:
            differs["settings"] = "settings fingerprint %s, wanted %s" % (
                container["settings"][:12] or "(none)", want["settings_hash"][:12])
    if want.get("image") is not None:
        image = have.get("image")
        if image is None:
            differs["image"] = "the image %s is not on the box" % want["image"]
        elif container is not None and container["image_id"] and container["image_id"] != image["id"]:
            differs["image"] = "the container runs image %s, wanted %s (%s)" % (
                container["image_id"][7:19], want["image"], image["id"][7:19])
    bad = []
    for state in have.get("weights") or []:
        if state.get("problem"):
            bad.append("%s: %s" % (state["name"], state["problem"]))
        elif state["unverified"]:
            bad.append("%s: %d of %d files not verified (%s)" % (
                state["name"], len(state["unverified"]), state["files"], ", ".join(state["unverified"][:3])))
    if len(have.get("weights") or []) < len(want.get("weights") or []):
        bad.append("not every repository was read")
    if bad:
        differs["weights"] = "; ".join(bad)
    if want.get("runtime") is not None and have.get("runtimes") is not None:
        if want["runtime"] not in have["runtimes"]:
            differs["runtime"] = "Docker has no %r runtime (has: %s)" % (
                want["runtime"], ", ".join(sorted(have["runtimes"])) or "none")
    health = have.get("health")
    if want.get("health") and "container" not in differs:
        if health is None or not health.get("ok"):
            differs["health"] = "GET /health: %s" % (
                (health or {}).get("error") or "status %s" % (health or {}).get("status"))
    return [{"part": part, "what": differs[part]} for part in PARTS if part in differs]


def lacks(want, differs):
    """Which of the image and the weights the box must be given before it can serve: those that
    differ, and both on a box with no record of a completed deploy (a new box: nothing it holds is
    known good). A run can then let a converged box lend them (site.yml's seed groups)."""
    parts = set(d["part"] for d in differs)
    unknown = "run_settings" in want and not want.get("recorded_settings")
    return [part for part in ("image", "weights") if unknown or part in parts]


def verified_weights(repos, states):
    """The repositories of ``repos`` (as weights_fetch plans them) the box holds whole: a listing
    recorded, at least one planned file, every one verified. A run whose repositories are all
    among them has nothing to fetch there, whatever else differs (another setting, an image
    removed): weights_fetch then gives that box no Hub client."""
    return [repo for repo, state in zip(repos, states)
            if state.get("listing") and state.get("files") and not state.get("unverified") and not state.get("problem")]


def summary(differs):
    if not differs:
        return "converged"
    return "differs: " + "; ".join("%s (%s)" % (d["part"], d["what"]) for d in differs)


class DockerReader:
    """The three reads the comparison needs from the Docker Engine API on its unix socket."""

    def __init__(self, docker_host, timeout):
        if not docker_host.startswith("unix://"):
            raise ValueError("only a unix:// docker_host is supported, got %r" % docker_host)
        self.socket_path = docker_host[len("unix://"):]
        self.timeout = timeout

    def get(self, path):
        """The decoded JSON of GET path; None for 404."""
        status, body = unix_get(self.socket_path, path, self.timeout)
        if status == 404:
            return None
        if status != 200:
            raise IOError("Docker answered %d to GET %s: %s" % (status, path, body[:200]))
        return json.loads(body.decode("utf-8"))

    def container(self, name):
        return self.get("/containers/%s/json" % quote(name, safe=""))

    def image(self, ref):
        return self.get("/images/%s/json" % quote(ref, safe=":/"))

    def runtimes(self):
        return sorted(((self.get("/info") or {}).get("Runtimes") or {}).keys())


def _failure(exc):
    return "%s%s" % (exc.__class__.__name__, (" %s" % exc) if isinstance(exc, ValueError) else "")


def read_health(url, timeout, getter=http_get, body_ok=None):
    """GET url with a short timeout: {ok, status, error}. ``body_ok(status, body)``, when given,
    also judges the body of a 200 (the engine's /health says "ok" in it; other services' probes
    answer plain text)."""
    try:
        status, body = getter(url, timeout)
    except Exception as exc:  # pylint: disable=broad-except  # any failure means "not healthy"
        return {"ok": False, "status": None, "error": _failure(exc)}
    if status != 200:
        return {"ok": False, "status": status, "error": "HTTP %s" % status}
    if body_ok is not None and not body_ok(status, body):
        said = (body or b"")[:120].decode("utf-8", "replace") if isinstance(body, bytes) else str(body)[:120]
        return {"ok": False, "status": status, "error": "HTTP 200 but not ok: %s" % (said.strip() or "no body")}
    return {"ok": True, "status": status, "error": ""}


def read_node_exporter_record(state_dir):
    """The monitoring role's record of the node exporter on the box, or None."""
    record = _load_json(os.path.join(state_dir, NODE_EXPORTER_RECORD))
    return record if isinstance(record, dict) else None


def node_exporter_state(record, data_dir, timeout, getter=http_get):
    """Does the node exporter the monitoring role left on the box (``record``: its
    ``NODE_EXPORTER_RECORD``, ``{"url": ...}``, or None) answer and serve the textfile series that
    names the data folder (``glm53_data_dir_info{...,path="DATA_DIR"}``)?
    Returns {converged, what}: ``what`` says why not, empty when it does."""
    url = (record or {}).get("url")
    if not url:
        return {"converged": False, "what": "no record of the node exporter's deploy"}
    try:
        status, body = getter(url, timeout)
    except Exception as exc:  # pylint: disable=broad-except  # any failure means "not serving"
        return {"converged": False, "what": "GET %s: %s" % (url, _failure(exc))}
    if status != 200:
        return {"converged": False, "what": "GET %s: HTTP %s" % (url, status)}
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    wanted = 'path="%s"' % data_dir
    if any(line.startswith("glm53_data_dir_info{") and wanted in line for line in text.splitlines()):
        return {"converged": True, "what": ""}
    return {"converged": False, "what": "the node exporter does not serve glm53_data_dir_info for %s" % data_dir}
