# -*- coding: utf-8 -*-
"""Run the Hub emulator (hub_emulator.py) on loopback for a test: repositories made by
make_repos.py, a free port and CDN port, faults and tokens as the emulator takes them."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port(avoid=()):
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


@contextlib.contextmanager
def running_hub(root, shards=2, shard_mib=2, tokens="", faults=None, log=None):
    """Make the repositories under ``root``, start the emulator; yield its URL; stop it."""
    subprocess.check_call([sys.executable, os.path.join(HERE, "make_repos.py"), str(root), "--shards", str(shards),
                           "--shard-mib", str(shard_mib)])
    port = free_port()
    cdn = free_port(avoid=(port,))
    cmd = [sys.executable, os.path.join(HERE, "hub_emulator.py"), "--root", str(root), "--bind", "127.0.0.1",
           "--port", str(port), "--cdn-port", str(cdn), "--faults", json.dumps(faults or {})]
    if tokens:
        cmd += ["--tokens", tokens]
    if log:
        cmd += ["--log", str(log)]
    proc = subprocess.Popen(cmd)
    url = "http://127.0.0.1:%d" % port
    try:
        for dummy in range(100):
            try:
                urllib.request.urlopen(url + "/_emulator/log")
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait()
