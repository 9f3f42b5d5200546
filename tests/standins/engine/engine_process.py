# -*- coding: utf-8 -*-
"""What the engine stand-in's tests share: its path, a free loopback port, and the folders a rank
reads at start (the CUDA kernels folder with its aot.json, and a checkpoint folder)."""

import os
import socket

ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensorfold_native.py")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_folders(tmp_path):
    """Make tmp_path/kernels (with aot.json) and tmp_path/model (with a config.json); return both."""
    kernels = tmp_path / "kernels"
    kernels.mkdir(exist_ok=True)
    (kernels / "aot.json").write_text("{}")
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text('{"model_type": "glm"}')
    return kernels, model
