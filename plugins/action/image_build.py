# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.image_build: community.docker.docker_image_build on the host, and a
failed build's output read into its code (module_utils/image_inputs.py holds the rule)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import build_problem, log_tail
from ansible_collections.glm53.tensorfold.plugins.modules import image_build

BUILD_MODULE = "community.docker.docker_image_build"


def build_module_args(params):
    """docker_image_build's options from ours: the base images are never pulled (they are pinned
    build arguments), and an unset network is left out."""
    module_args = {key: params[key] for key in ("name", "tag", "path", "args", "labels", "rebuild")}
    module_args["pull"] = False
    if params.get("network"):
        module_args["network"] = params["network"]
    return module_args


NO_IMAGE_TODO = ("Make Docker's own builder the host's current one (docker buildx use default; docker buildx ls marks "
                 "the current builder with *), then run again.")


def left_no_image(built, params, host):
    """The coded message of a build that ran (BuildKit's output came back) and succeeded but left no
    image under its name in Docker's image store, else None. buildx does that when the host's current
    builder is not Docker's own (a docker-container or remote builder keeps the result in its cache:
    "No output specified with docker-container driver"); docker_image_build passes no --load."""
    if built.get("failed") or "stdout" not in built or built.get("image"):
        return None
    said = [line.strip() for line in "\n".join(str(built.get(key) or "") for key in ("stderr", "stdout")).splitlines()
            if "No output specified" in line]
    return problem("E_DOCKER", host, "the build of %s:%s succeeded but left no image in Docker's image store, so the host's "
                   "buildx builder is not Docker's own%s" % (params["name"], params["tag"], (" (%s)" % said[0][:300]) if said else ""),
                   NO_IMAGE_TODO)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(image_build.ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(image_build.ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("%s: %s" % (self._task.action, "; ".join(checked.error_messages)))
        params = checked.validated_parameters
        built = self._execute_module(module_name=BUILD_MODULE, module_args=build_module_args(params),
                                     task_vars=task_vars)
        result.update(built)
        host = task_vars.get("inventory_hostname", "host")
        missing = left_no_image(built, params, host)
        if missing:
            result.update(failed=True, msg=missing)
            for key in ("stdout", "stderr"):
                result[key] = log_tail(result.get(key))
            return result
        # A module that crashed (MODULE FAILURE: no Python, a missing library) keeps Ansible's own
        # account; only a build that ran and failed is read for its cause.
        if built.get("failed") and "module_stderr" not in built:
            result["msg"] = build_problem(built, host, params["engine_commit"])
            # The module's own error (ansible-core 2.19 prints it as the task's error line) gives
            # way to the coded message; BuildKit's output stays in stdout/stderr.
            result.pop("exception", None)
            # Ansible prints a failed task's whole result: BuildKit's output (thousands of lines for
            # the engine's build) would bury the coded message, so only its tail stays.
            for key in ("stdout", "stderr"):
                if isinstance(result.get(key), str):
                    result[key] = log_tail(result[key])
        return result
