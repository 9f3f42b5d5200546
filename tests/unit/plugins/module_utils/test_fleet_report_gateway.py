# -*- coding: utf-8 -*-
"""The fleet report with a site gateway: its URL above the table, a column per box, why a box is not up."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import build_report

URL = "http://10.20.0.5:8020/v1"
LIVE = {"smoke_test_result": {"status": "live", "endpoint": "http://10.20.0.11:8020/v1"}, "fleet_report_reached_end": True}


def with_gateway(facts, state, detail=""):
    return dict(facts, gateway_state={"url": URL, "gateway": "gateway-01", "state": state, "detail": detail})


def test_the_report_names_the_gateway_and_each_box_state_there():
    report = build_report({
        "gpu-box-01": with_gateway(LIVE, "up", "UP, last check L7OK 200"),
        "gpu-box-02": with_gateway(LIVE, "down", "DOWN, last check L7TOUT"),
        "gpu-box-03": with_gateway({"step_failure": {"stage": "gpu_host_checks", "message": "[E_GPU_BUSY] x"},
                                    "fleet_report_reached_end": True}, "held out", "failed in gpu_host_checks this run"),
    })
    assert report["gateways"] == [URL]
    text = "\n".join(report["gateway_lines"])  # printed above the table by the report's template
    assert "Gateway: %s (1 of 3 boxes up)." % URL in text
    assert "- **gpu-box-02** at the gateway: down (DOWN, last check L7TOUT)" in text
    assert "- **gpu-box-03** at the gateway: held out (failed in gpu_host_checks this run)" in text
    states = dict((line["host"], line["gateway"]["state"]) for line in report["hosts"])
    assert states == {"gpu-box-01": "up", "gpu-box-02": "down", "gpu-box-03": "held out"}


def test_without_a_gateway_the_report_is_as_before():
    report = build_report({"gpu-box-01": LIVE})
    assert "gateways" not in report
    assert report["gateway_lines"] == [] and not any("gateway" in line for line in report["hosts"])
