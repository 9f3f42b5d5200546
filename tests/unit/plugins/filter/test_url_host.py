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


API_HOST = FilterModule().filters()["api_host"]


def test_an_api_on_every_address_is_reached_on_loopback():
    for bind in ("0.0.0.0", "::", "", None):
        assert API_HOST(bind) == "127.0.0.1"


def test_an_api_bound_to_one_address_is_reached_there():
    assert API_HOST("10.0.0.5") == "10.0.0.5"
    assert API_HOST("::1") == "::1" and URL_HOST(API_HOST("::1")) == "[::1]"
    assert API_HOST("127.0.0.1") == "127.0.0.1"


PUBLIC_ENDPOINT = FilterModule().filters()["public_endpoint"]


def test_the_public_endpoint_is_the_operators_url_else_the_boxs_address():
    assert PUBLIC_ENDPOINT("https://llm.example/v1", "10.0.0.5", 8020) == "https://llm.example/v1"
    assert PUBLIC_ENDPOINT("", "10.0.0.5", 8020) == "http://10.0.0.5:8020/v1"
    assert PUBLIC_ENDPOINT(None, "2001:db8::5", "8021") == "http://[2001:db8::5]:8021/v1"
