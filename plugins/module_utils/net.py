# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Addresses as they go into URLs (the engine's API, the gateway's), where the box itself reaches its
own API, and how it asks it (``http_get``), written once. Standard library only: the box reader
(plugin_utils/box_reader.py) sends this file to the hosts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client as http_client
from urllib.parse import urlsplit


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


def http_get(url, timeout, headers=None):
    """GET url straight from the box: no proxy (a proxy in the environment must not stand between a
    box and its own service), no redirect, no certificate check. Returns (status, body) whatever the
    status; a failed connection raises (OSError, http.client.HTTPException). Plain http.client: this
    runs on every box in every run, and ansible.module_utils.urls costs each run about 20 ms of the
    box's CPU to import."""
    status, dummy, body = http_request("GET", url, timeout, headers=headers)
    return status, body


def http_request(method, url, timeout, body=None, headers=None, verify=False):
    """``method`` url with ``body`` (bytes) straight from the box, as http_get; ``verify`` checks an
    https URL's certificate and name. Returns (status, reason, body) whatever the status; a failed
    connection raises (OSError, http.client.HTTPException); a body cut short raises
    http.client.IncompleteRead with the answer's ``status`` set on it."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        import ssl  # pylint: disable=import-outside-toplevel  # only for an https URL
        context = ssl.create_default_context()
        if not verify:
            context.check_hostname = False  # the box's own service, often a self-signed certificate
            context.verify_mode = ssl.CERT_NONE
        conn = http_client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=context)
    elif parts.scheme == "http":
        conn = http_client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    else:
        raise ValueError("not an http(s) URL: %s" % url)
    try:
        conn.request(method, (parts.path or "/") + ("?" + parts.query if parts.query else ""), body=body,
                     headers=headers or {})
        resp = conn.getresponse()
        try:
            return resp.status, resp.reason, resp.read()
        except http_client.IncompleteRead as cut:
            cut.status = resp.status
            raise
    finally:
        conn.close()
