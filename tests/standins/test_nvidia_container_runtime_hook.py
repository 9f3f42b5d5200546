# -*- coding: utf-8 -*-
"""The stand-in nvidia-container-runtime-hook plays the prestart call dockerd makes for --gpus."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvidia-container-runtime-hook")


def test_prestart_reads_the_oci_state_and_lets_the_container_start():
    done = subprocess.run([HOOK, "prestart"], input=b'{"ociVersion": "1.0.2", "id": "x", "pid": 1, "bundle": "/b"}',
                          capture_output=True, check=False)
    assert done.returncode == 0 and done.stdout == b""


def test_another_call_is_refused():
    done = subprocess.run([HOOK, "poststart"], input=b"", capture_output=True, check=False)
    assert done.returncode == 1 and b"only prestart" in done.stderr
