# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.hf_snapshot_progress: follow a background download on the
controller, printing a bounded number of progress lines, then return the download's result."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.glm53.tensorfold.plugins.module_utils import follow
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem

display = Display()


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(("jid", "progress_file", "heartbeat_file", "wait", "timeout", "label"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        jid = str(args["jid"])
        wait = float(args.get("wait", 20))
        timeout = int(args.get("timeout", 172800))
        label = args.get("label", "download")
        host = task_vars.get("inventory_hostname", "host")
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        look_args = {"jid": jid, "progress_file": args["progress_file"], "wait": wait,
                     "job_file": self._connection._shell.join_path(async_dir, jid)}
        if args.get("heartbeat_file"):
            look_args["heartbeat_file"] = args["heartbeat_file"]
        parent = os.getppid()
        began = time.time()
        printed, lines, looks = None, 0, 0
        while True:
            if os.getppid() != parent:
                # The run that started this worker is gone: stop touching the heartbeat.
                result.update(failed=True, msg="the run ended while following %s" % label)
                return result
            answer = self._execute_module(module_name="glm53.tensorfold.hf_snapshot_progress",
                                          module_args=look_args, task_vars=task_vars)
            looks += 1
            if answer.get("failed"):
                return answer
            if answer["finished"]:
                break
            if follow.line_due(printed, answer["percent"]):
                display.display("%s: %s: %s" % (host, label, answer["text"]))
                printed, lines = answer["percent"], lines + 1
            if time.time() - began > timeout:
                result.update(failed=True, code="E_DOWNLOAD", msg=problem(
                    "E_DOWNLOAD", host, "%s still downloading after %d s (weights_fetch_timeout)" % (label, timeout),
                    "Run again to resume; it stops by itself once nothing follows it."))
                return result
        final = self._execute_module(module_name="ansible.legacy.async_status",
                                     module_args={"jid": jid, "_async_dir": async_dir}, task_vars=task_vars)
        final.pop("started", None)
        final.pop("finished", None)
        final.pop("ansible_job_id", None)
        final.pop("results_file", None)
        final.update(progress_lines=lines, looks=looks)
        return final
