# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Addresses as they go into URLs (the engine's API, the gateway's), written once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def url_host(host):
    """An IPv6 literal in brackets (``2001:db8::5`` -> ``[2001:db8::5]``); names and IPv4 as they are."""
    host = str(host).strip()
    return "[%s]" % host if ":" in host and not host.startswith("[") else host
