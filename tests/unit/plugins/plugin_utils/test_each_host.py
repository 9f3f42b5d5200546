# -*- coding: utf-8 -*-
"""How each_host deals a batch's hosts out to processes (the reads themselves:
tests/integration/test_converged_info.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.glm53.tensorfold.plugins.plugin_utils import each_host

PER = each_host.SHARD_HOSTS


@pytest.mark.parametrize("hosts, cpus, processes", [
    (1, 8, 1), (PER - 1, 8, 1), (2 * PER - 1, 8, 1),  # under two processes' worth: the worker alone
    (2 * PER, 8, 2), (32, 2, 2), (100, 8, 8), (100, 64, 100 // PER),
    (32, 1, 1), (32, None, 1),  # one CPU, or a count Python cannot tell
])
def test_one_process_per_share_of_hosts_and_at_most_one_per_cpu(hosts, cpus, processes):
    names = ["box-%03d" % n for n in range(hosts)]
    shares = each_host.shards(names, cpus)
    assert len(shares) == processes
    assert sorted(sum(shares, [])) == names  # every host once
    assert max(map(len, shares)) - min(map(len, shares)) <= 1  # even shares
    assert shares[0][0] == names[0]  # the worker's own share starts with the batch's first host
