# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Addresses as they go into URLs (the engine's API, the gateway's), and where the box itself reaches
its own API, written once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def url_host(host):
    """An IPv6 literal in brackets (``2001:db8::5`` -> ``[2001:db8::5]``); names and IPv4 as they are."""
    host = str(host).strip()
    return "[%s]" % host if ":" in host and not host.startswith("[") else host


# Bind addresses that listen on every address of the box, where the box reaches its API on loopback.
EVERY_ADDRESS = ("0.0.0.0", "::", "")


def api_host(bind):
    """Where the box itself reaches an API bound to ``bind`` (tensorfold_host): ``127.0.0.1`` for
    every address (``0.0.0.0``, ``::`` or empty), else that address, since an engine bound to
    ``10.0.0.5`` does not answer on loopback."""
    bind = "" if bind is None else str(bind).strip()
    return "127.0.0.1" if bind in EVERY_ADDRESS else bind
