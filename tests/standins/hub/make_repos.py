#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Write small stand-in repositories for hub_emulator.py.

They have the shape of the recipe's real ones (config.json, model.safetensors.index.json naming
every shard, the shards, a tokenizer) at the real pinned commits (roles/tensorfold defaults), so the
role runs with its defaults against the emulator, but with shards of a few MiB of seeded bytes.

Usage: make_repos.py ROOT [--shards N] [--shard-mib M]
"""

import argparse
import json
import os
import random

import make_tokenizer

REPOS = [
    # repo id, commit, gated, shard count factor
    ("Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold", "078455ffe6472f9a52fbc1139f58b9db2881b25c", False),
    ("Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold-Ablit", "57edefd2f5d9b371c8345883304d5af68b52fa24", True),
    ("incoai/GLM-5.3-Flash-DFlash2", "bf582e4eacc1810f76656d1811693ff6c6737d2a", False),
]


def write_repo(root, repo_id, commit, gated, shards, shard_bytes, seed):
    folder = os.path.join(root, repo_id)
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, shards) for i in range(shards)]
    weight_map = {}
    for index, name in enumerate(names):
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(rng.randbytes(shard_bytes))
        weight_map["model.layers.%d.weight" % index] = name
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as handle:
        json.dump({"metadata": {"total_size": shard_bytes * shards}, "weight_map": weight_map}, handle, indent=2)
    with open(os.path.join(folder, "config.json"), "w") as handle:
        json.dump({"architectures": ["Glm5ForCausalLM"], "model_type": "glm5", "num_hidden_layers": shards}, handle,
                  indent=2)
    # A small word-level tokenizer (tokenizer.json + tokenizer_config.json) that load tools read
    # like the checkpoint's own (the bench's aiperf needs one).
    make_tokenizer.write(folder)
    with open(os.path.join(root, repo_id + ".repo.json"), "w") as handle:
        json.dump({"commit": commit, "branches": {"main": commit}, "gated": gated}, handle)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--shard-mib", type=float, default=2)
    args = parser.parse_args()
    for seed, (repo_id, commit, gated) in enumerate(REPOS):
        shards = args.shards if seed != 2 else 1
        write_repo(args.root, repo_id, commit, gated, shards, int(args.shard_mib * 1024 * 1024), seed)


if __name__ == "__main__":
    main()
