# -*- coding: utf-8 -*-
"""url_host: an IPv6 literal goes into a URL in brackets; names and IPv4 as they are."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.filter.url_host import FilterModule

URL_HOST = FilterModule().filters()["url_host"]


def test_ipv6_literals_are_bracketed_once():
    assert URL_HOST("2001:db8::5") == "[2001:db8::5]"
    assert URL_HOST("[2001:db8::5]") == "[2001:db8::5]"


def test_names_and_ipv4_stay():
    assert URL_HOST("10.20.0.5") == "10.20.0.5"
    assert URL_HOST("gateway-01.example") == "gateway-01.example"
