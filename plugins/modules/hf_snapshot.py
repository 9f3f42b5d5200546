#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_snapshot
short_description: Fetch a pinned Hugging Face Hub snapshot into a folder, resumable and verified
description:
  - Lists the repository at a pinned commit with the huggingface_hub API, checks the free space
    before the first byte, fetches what is missing through a stable partial name per file
    (a killed run resumes with an HTTP Range request from the last recorded chunk, so at most one
    chunk is fetched again), and verifies every LFS file's sha256 and every small file's git oid
    against the listing.
  - Verifications are recorded in I(state_dir) keyed by revision, path, size and mtime, so a later
    run of a complete snapshot reads no file bytes and, for a pinned commit, makes no Hub request.
  - The run does not wait for the disk. A verification made in this boot is recorded with the
    boot's id; a later run in the same boot fsyncs its files and records it for good; after a reboot
    (a power cut may have lost bytes the disk had not written) the files are hashed again.
  - From a plain-HTTP endpoint no proxy applies to (a peer host, a mirror; any plain-HTTP endpoint
    with I(use_proxy=false)) the file bytes are read with Python's C(http.client) straight into
    reused buffers, from the Hub's resolve URL with the token as a bearer header; huggingface_hub is
    not even imported when the listing is known (a peer copy). HTTPS endpoints and proxies go
    through huggingface_hub's HTTP session.
  - A local file whose checksum does not match is reported in C(corrupted), fetched again and
    verified.
  - "Failures are coded the recipe's way, C([CODE] host: what. What to do.): C(E_HF_TOKEN) (401, 403 for
    a gated repository's terms or a token the Hub refuses, a listing whose checksums the Hub withholds,
    a token no HTTP header can carry), C(E_DOWNLOAD) (network or server, once 408, 429 and 5xx replies,
    broken connections and the refusals of the CDN a download was redirected to were asked again a few
    times; rerun to resume), C(E_DISK) (too little
    room before the first byte, or a full filesystem while writing), C(E_SETTINGS) (unknown
    repository, revision or file, unpinned revision, offline mode with files still to fetch)."
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
requirements:
  - huggingface_hub >= 1.0 on the managed host (the weights_fetch role provides it), except for a
    direct plain-HTTP copy with a known listing (I(use_proxy=false) and I(listing))
options:
  repo_id:
    description: The repository, C(owner/name).
    type: str
    required: true
  revision:
    description:
      - A full 40-hex commit. A branch or tag is refused unless I(allow_unpinned=true).
    type: str
    required: true
  allow_unpinned:
    description: Accept a branch or tag (resolved to its commit with one Hub request every run).
    type: bool
    default: false
  local_dir:
    description: The folder the files land in (created when missing).
    type: path
    required: true
  state_dir:
    description:
      - Where the listing, the verification records and the partial files live. Must be on the same
        filesystem as I(local_dir). Defaults to C(LOCAL_DIR/../.state/hf_snapshot/BASENAME).
    type: path
  token:
    description:
      - A Hub read token. Defaults to the content of I(token_file), else the C(HF_TOKEN) environment
        variable. Never returned or logged.
      - Prefer I(token_file) with C(async), since the arguments of an async module stay on the host
        while it runs, and after a killed run.
    type: str
  token_file:
    description:
      - A root-only file holding the Hub read token (first line). A missing or empty file means no token.
    type: path
  forget_token_file:
    description:
      - Remove I(token_file) as soon as it is read, before anything else runs (not in check mode), so
        no file holds the token while the download runs or after it ends, fails or is abandoned.
      - Leave it false for a file other readers share (a peer copy's run secret).
    type: bool
    default: false
  gated:
    description:
      - The repository is gated. When files must be downloaded and no token was given, fail with
        C(E_HF_TOKEN) before the first byte; a snapshot verified in place needs no token.
    type: bool
    default: false
  endpoint:
    description: The Hub (or a mirror, or a peer host serving a verified copy). Defaults to C(HF_ENDPOINT) or the Hub.
    type: str
  use_proxy:
    description:
      - Honour the environment's proxy variables (C(http_proxy), C(no_proxy)...) for a plain-HTTP
        I(endpoint). False reaches it directly, as a peer on the site network is reached; with a
        known I(listing) such a copy then needs no huggingface_hub on the host at all.
      - HTTPS endpoints always go through huggingface_hub's session and its proxy settings.
    type: bool
    default: true
  endpoint_wait:
    description:
      - Seconds to wait, before the first request, for I(endpoint) to accept a connection (a peer's
        server started in the same run); 0 does not wait. An endpoint that does not within that
        time fails with E_DOWNLOAD. Not in check mode.
    type: int
    default: 0
  allow_patterns:
    description: Only paths matching one of these globs are fetched.
    type: list
    elements: str
  verify:
    description: Check checksums (sha256 for LFS files, the git oid for small files) once per file.
    type: bool
    default: true
  chunk_size_mib:
    description: How often a download records its resume point (at most 16 MiB), the most a kill re-fetches.
    type: int
    default: 16
  progress_file:
    description: A JSON file the module rewrites every second with bytes done, total, rate and ETA.
    type: path
  host_label:
    description: The host name used in problem messages.
    type: str
  heartbeat_file:
    description:
      - A file the run that follows the download touches (M(glm53.tensorfold.hf_snapshot_progress)).
        Removed at the start; once a follower has touched it, the download stops when it is older
        than I(idle_timeout) seconds (the run was killed). Committed chunks stay, so the next run
        resumes.
    type: path
  idle_timeout:
    description: Seconds without a touch of I(heartbeat_file) after which the download stops; 0 never.
    type: int
    default: 0
  listing:
    description:
      - The repository's file list at I(revision) as another host's state folder records it (its
        C(listing-COMMIT.json), with C(repo_id), C(commit) and C(entries)), so a copy from a peer
        plans without asking anything. Used when I(state_dir) holds no listing of that commit and
        its C(repo_id) and C(commit) are this run's; written to I(state_dir) outside check mode.
    type: dict
attributes:
  check_mode:
    support: full
    description: Reports what would be downloaded and its size; writes nothing.
"""

EXAMPLES = r"""
- name: Fetch the pinned checkpoint
  glm53.tensorfold.hf_snapshot:
    repo_id: Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold
    revision: 078455ffe6472f9a52fbc1139f58b9db2881b25c
    local_dir: /srv/glm53/model
    state_dir: /srv/glm53/.state/weights/model

- name: Fetch a gated repository with a token from the vault
  glm53.tensorfold.hf_snapshot:
    repo_id: Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold-Ablit
    revision: 57edefd2f5d9b371c8345883304d5af68b52fa24
    local_dir: /srv/glm53/model-ablit
    token: "{{ vault_hf_token }}"
  no_log: true
"""

RETURN = r"""
revision:
  description: The commit the folder holds.
  returned: always
  type: str
files:
  description: The repository paths the snapshot holds.
  returned: always
  type: list
  elements: str
total_bytes:
  description: Size of the whole snapshot.
  returned: always
  type: int
download_files:
  description: The paths that were (or in check mode would be) fetched.
  returned: always
  type: list
  elements: str
download_bytes:
  description: Bytes that were (or would be) fetched, net of resumable partial files.
  returned: always
  type: int
downloaded_bytes:
  description: Bytes fetched by this run.
  returned: always
  type: int
verified:
  description: True when every file of the snapshot has a checksum that matches the listing.
  returned: always
  type: bool
verified_files:
  description: Files whose checksum was computed by this run.
  returned: always
  type: list
  elements: str
corrupted:
  description: Files found with a wrong size or checksum (C(where) is local or download); they were fetched again.
  returned: always
  type: list
  elements: dict
resumed:
  description: Files continued from a partial download (C(from) byte offset, C(discarded) torn bytes fetched again).
  returned: always
  type: list
  elements: dict
discarded_bytes:
  description: Partial bytes after the last committed chunk that were dropped and fetched again.
  returned: always
  type: int
hub_requests:
  description: HTTP requests this run sent to the endpoint (0 for a complete pinned snapshot).
  returned: always
  type: int
local_bytes_hashed:
  description: File bytes read from disk to compute checksums (0 when every file was verified before).
  returned: always
  type: int
code:
  description: The recipe's code on failure.
  returned: failed
  type: str
"""

import os
import shutil
import socket
import sys
import threading
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_transfer, net
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem


def read_token(path):
    """The first line of a token file, or None when it is missing or empty."""
    if not path:
        return None
    try:
        with open(path) as handle:
            return handle.readline().strip() or None
    except (IOError, OSError):
        return None


def take_token(params, check_mode):
    """The token: the option, else I(token_file)'s first line (the file removed once read with
    forget_token_file, outside check mode), else HF_TOKEN; None when there is none. Surrounding spaces
    and newlines are no part of it, as huggingface_hub reads a token (a YAML block scalar ends in one);
    one inside stays, and is refused before any request."""
    token = (params["token"] or "").strip() or read_token(params["token_file"])
    if params["forget_token_file"] and params["token_file"] and not check_mode:
        forget(params["token_file"])
    return token or (os.environ.get("HF_TOKEN") or "").strip() or None


def forget(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def leave_no_payload():
    """Remove the folder AnsiballZ unpacked this module into: it removes it itself when the module
    returns, but os._exit skips that, and every abandoned download would leave one in the temp folder."""
    for entry in sys.path:
        folder = os.path.dirname(entry)
        name = os.path.basename(folder)
        if entry.endswith("_payload.zip") and name.startswith("ansible_") and "_payload_" in name:
            shutil.rmtree(folder, ignore_errors=True)
            return folder
    return None


def watch_heartbeat(path, idle_timeout, progress_file):
    """Stop this process when the run that follows it stops touching ``path`` (it was killed)."""
    while True:
        time.sleep(1)
        if hf_plan.heartbeat_stale(_mtime(path), time.time(), idle_timeout):
            hf_transfer.Progress(progress_file, 0).finish({"failed": "E_DOWNLOAD", "abandoned": True})
            leave_no_payload()
            os._exit(3)  # committed chunks are on disk; the next run resumes from them


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            allow_unpinned=dict(type="bool", default=False),
            local_dir=dict(type="path", required=True),
            state_dir=dict(type="path"),
            token=dict(type="str", no_log=True),
            token_file=dict(type="path"),
            forget_token_file=dict(type="bool", default=False),
            gated=dict(type="bool", default=False),
            heartbeat_file=dict(type="path"),
            idle_timeout=dict(type="int", default=0),
            endpoint=dict(type="str"),
            use_proxy=dict(type="bool", default=True),
            endpoint_wait=dict(type="int", default=0),
            allow_patterns=dict(type="list", elements="str"),
            verify=dict(type="bool", default=True),
            chunk_size_mib=dict(type="int", default=16),
            progress_file=dict(type="path"),
            host_label=dict(type="str"),
            listing=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    # First, so that no failure below leaves the token's file behind.
    token = take_token(params, module.check_mode)
    host = params["host_label"] or socket.gethostname()
    if not 1 <= params["chunk_size_mib"] <= 16:
        module.fail_json(msg=problem("E_SETTINGS", host, "chunk_size_mib must be 1 to 16"), code="E_SETTINGS")
    local_dir = params["local_dir"].rstrip("/")
    state_dir = params["state_dir"] or os.path.join(
        os.path.dirname(local_dir), ".state", "hf_snapshot", os.path.basename(local_dir))
    endpoint = params["endpoint"] or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    snapshot = hf_transfer.Snapshot(
        params["repo_id"], params["revision"], local_dir, state_dir, token=token, endpoint=endpoint,
        allow_patterns=params["allow_patterns"], verify=params["verify"],
        allow_unpinned=params["allow_unpinned"], chunk_size=params["chunk_size_mib"] * 1024 * 1024,
        progress_file=params["progress_file"], check_mode=module.check_mode, gated=params["gated"],
        listing=params["listing"], use_proxy=params["use_proxy"])
    if params["heartbeat_file"] and params["idle_timeout"] > 0 and not module.check_mode:
        # Armed by the follower's first look: a file left by an earlier run must not read as stale,
        # and a download whose follower waits for a free fork (more hosts than forks) goes on.
        forget(params["heartbeat_file"])
        watchdog = threading.Thread(target=watch_heartbeat,
                                    args=(params["heartbeat_file"], params["idle_timeout"], params["progress_file"]))
        watchdog.daemon = True
        watchdog.start()
    try:
        if not module.check_mode and not os.path.isdir(state_dir):
            try:
                os.makedirs(state_dir, 0o700)
            except OSError as err:  # a full disk or a read-only folder: the operator's failure, coded
                raise snapshot.disk_error(err, state_dir)
        if params["endpoint_wait"] > 0 and not module.check_mode and not net.wait_for_listener(endpoint, params["endpoint_wait"]):
            raise hf_transfer.SnapshotError("E_DOWNLOAD", "%s did not accept a connection within %d s"
                                            % (endpoint, params["endpoint_wait"]))
        result = snapshot.run()
    except hf_transfer.SnapshotError as err:
        hf_transfer.Progress(params["progress_file"], 0).finish({"failed": err.code})
        module.fail_json(msg=problem(err.code, host, err.what), code=err.code,
                         hub_requests=snapshot.hub_requests, resumed=snapshot.resumed,
                         discarded_bytes=snapshot.refetched_bytes)
    except ValueError as err:
        module.fail_json(msg=problem("E_DOWNLOAD", host, str(err), "Check the repository listing."), code="E_DOWNLOAD")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
