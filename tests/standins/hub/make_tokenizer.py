#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Write a small word-level tokenizer (``tokenizer.json`` + ``tokenizer_config.json``).

Stands in for the checkpoint's own tokenizer, which the bench's load tool reads to count and
make prompt tokens (nothing can fetch one from the Hub here). One token per whitespace-separated
word, the way the engine stand-in counts tokens, so the load tool's counts and the stand-in's
agree. Standard library only: the files are the Hugging Face ``tokenizers`` JSON format
(WordLevel model, WhitespaceSplit pre-tokenizer), which ``tokenizers``/``transformers`` load.

Usage: make_tokenizer.py FOLDER [--words N]
"""

import argparse
import json
import os

UNK = "[UNK]"


def tokenizer(words):
    vocab = {UNK: 0, "token": 1}
    for number in range(words):
        vocab["w%d" % number] = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": UNK, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNK},
    }


def write(folder, words=2048):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w") as handle:
        json.dump(tokenizer(words), handle)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as handle:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNK,
                   "model_max_length": 1048576}, handle)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--words", type=int, default=2048)
    args = parser.parse_args()
    write(args.folder, args.words)


if __name__ == "__main__":
    main()
