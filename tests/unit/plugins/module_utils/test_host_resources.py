# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import socket

from ansible_collections.glm53.tensorfold.plugins.module_utils import host_resources as res

GIB = 1024 ** 3
# A host with / on device 1, /srv on device 2 and /var/lib/docker on device 3.
EXISTING = {"/", "/srv", "/var", "/var/lib", "/var/lib/docker", "/srv/glm53"}
DEVICES = {"/": 1, "/var": 1, "/var/lib": 1, "/srv": 2, "/srv/glm53": 2, "/var/lib/docker": 3}
FREE = {1: 50 * GIB, 2: 185 * GIB, 3: 45 * GIB}


def budget(requests):
    return res.disk_budget(requests, EXISTING.__contains__, DEVICES.__getitem__,
                           lambda path: FREE[DEVICES[path]])


def test_a_missing_path_lands_on_its_nearest_existing_parent():
    assert res.nearest_existing("/srv/glm53/model/x", EXISTING.__contains__) == "/srv/glm53"
    assert res.nearest_existing("/opt/nothing", EXISTING.__contains__) == "/"


def test_paths_on_one_filesystem_add_up_and_can_fail_together():
    result = budget([
        {"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 180},
        {"name": "drafter", "path": "/srv/glm53/drafter", "need_gib": 10},
        {"name": "image build", "path": "/var/lib/docker", "need_gib": 40},
    ])
    assert [(fs["mount"], fs["need_gib"], fs["free_gib"], fs["ok"]) for fs in result] == [
        ("/srv", 190, 185.0, False),
        ("/var/lib/docker", 40, 45.0, True),
    ]
    assert [p["lands_on"] for p in result[0]["paths"]] == ["/srv/glm53", "/srv/glm53"]


def test_each_path_alone_fits_on_separate_filesystems():
    result = budget([
        {"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 180},
        {"name": "drafter", "path": "/opt/drafter", "need_gib": 10},
    ])
    assert [fs["ok"] for fs in result] == [True, True]
    assert result[1]["mount"] == "/"


def test_meminfo_available_in_mib():
    text = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   16777216 kB\n"
    assert res.parse_meminfo(text) == 16384
    assert res.parse_meminfo("MemTotal: 1 kB\n") is None


def test_a_listening_port_is_not_free_and_a_closed_one_is():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        free, why = res.port_free(port, "127.0.0.1")
        assert not free
        assert why == "port %d is in use on 127.0.0.1" % port
    finally:
        server.close()
    assert res.port_free(port, "127.0.0.1") == (True, "")


def test_an_address_the_host_lacks_is_named():
    free, why = res.port_free(8020, "192.0.2.1")
    assert not free
    assert "192.0.2.1" in why


def test_tools_report_missing_as_none():
    assert res.find_tools(["curl", "hf"], {"curl": "/usr/bin/curl"}.get) == {"curl": "/usr/bin/curl", "hf": None}
