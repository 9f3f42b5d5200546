# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The recipe's failure and warning codes, kept in one place.

Every role and module reports a problem as ``[CODE] host: what is wrong. What to do.`` The table
below is the single source: ``docs/codes.md`` is checked against it by the unit tests, so the
operator's guide and the code cannot drift apart.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# code -> (severity, what to do by default). Severity is "error" (the host fails) or "warning".
CODES = {
    "E_SETTINGS": ("error", "Fix the setting in group_vars, host_vars or -e and run again."),
    "E_PLATFORM": ("error", "Use a Linux x86_64 host."),
    "E_DEPENDENCY": ("error", "Install the missing tool and run again."),
    "E_DOCKER": ("error", "Install Docker and start its daemon (or run the nvidia_toolkit role)."),
    "E_DOCKER_GROUP": ("error", "Add the user to the docker group and log in again."),
    "E_NVIDIA_RUNTIME": ("error", "Install the NVIDIA Container Toolkit and configure Docker's nvidia runtime (the nvidia_toolkit role does both)."),
    "E_GPU": ("error", "Check the cards and tensorfold_gpus, or set the gpu_host_checks expectations for this card."),
    "E_DRIVER": ("error", "Install an NVIDIA driver for CUDA 13 (580 or newer)."),
    "E_GPU_MEMORY": ("error", "Stop what holds the GPU's memory."),
    "E_GPU_BUSY": ("error", "Stop the workload on that GPU; raise tensorfold_max_gpu_used_mib only for a display GPU."),
    "W_POWER": ("warning", "Cap the card with nvidia-smi -pl, or set gpu_host_checks_power_cap_w."),
    "W_COMPUTE_MODE": ("warning", "Set the card's compute mode to Default: nvidia-smi -i N -c DEFAULT, as root."),
    "W_GPU_UNREAD": ("warning", "Read the value by hand (nvidia-smi -q -i N, as root): the checks could not judge it."),
    "W_P2P": ("warning", "NCCL still works over host memory, but more slowly; check IOMMU/ACS and the BIOS."),
    "E_DISK": ("error", "Free space on that filesystem or move tensorfold_data_dir."),
    "W_MEMORY": ("warning", "Free host memory: the ranks stage each layer through it while loading."),
    "E_PORT": ("error", "Stop what holds the port, or set tensorfold_port / tensorfold_nccl_port."),
    "E_TOOLKIT": ("error", "Check the NVIDIA Container Toolkit repository and pinned version."),
    "E_IMAGE": ("error", "Read the build log above; fix the build inputs and run again."),
    "E_PATCHES": ("error", "Refresh or drop the named patch; the series must apply in order with no fuzz."),
    "E_DOWNLOAD": ("error", "Check free space and the connection, then run again to resume."),
    "E_HF_TOKEN": ("error", "Check tensorfold_hf_token, accept the repository's terms on its page, or set tensorfold_ablit to false."),
    "E_MODEL": ("error", "Point tensorfold_model_dir at a complete checkpoint, or use tensorfold_model_source: download."),
    "E_LOCK": ("error", "Another start on the host holds its lock (the lock ends with that start); wait for it and run again."),
    "E_FIT": ("error", "Lower tensorfold_context or tensorfold_parallel, or free GPU memory."),
    "E_START": ("error", "Read the rank log tails above."),
    "E_API": ("error", "Read the rank log tails above; raise tensorfold_wait_timeout for a slow first start."),
    "E_SMOKE": ("error", "Read the reply above and rank0.log."),
    "E_WEDGED": ("error", "Restart the box (playbooks/heal.yml does it, drained at the gateway) and read rank0.log."),
    "E_UNREACHABLE": ("error", "Check its SSH access, power and network (ansible.builtin.ping answers once it is back), then run again."),
    "E_GATEWAY": ("error", "Read the gateway's message; run site.yml --tags gateway to set it up again."),
    "W_GATEWAY": ("warning", "Run site.yml --tags gateway so the gateway forwards to this box again."),
    "E_STOP": ("error", "Stop the container by hand (docker rm -f) and run again."),
    "W_STREAMS": ("warning", "Fewer streams came up than tensorfold_parallel asked; lower tensorfold_context or free memory."),
    "W_OPEN_API": ("warning", "Set tensorfold_api_key (kept in a vault), or let a firewall admit only the gateway and the clients to tensorfold_port."),
    "W_RESTARTS": ("warning", "Docker restarted the engine container after its ranks ended; read rank0.log and rank1.log of logs/current."),
    "E_BUNDLE": ("error", "Build the bundle again where the Internet is (playbooks/bundle.yml resumes), or carry in the item named."),
    "E_BUNDLE_VERSION": ("error", "Install the collection the bundle carries (ansible-galaxy collection install --force"
                                  " BUNDLE/collection/glm53-tensorfold-VERSION.tar.gz), or build the bundle again with this version."),
    "W_SLOW": ("warning", "Compare the box with the others: its host checks' warnings, power limits, driver and peer-to-peer."),
    "W_BASELINES": ("warning", "Fix the file or delete it: the next bench writes it afresh."),
    "W_LICENSE": ("warning", "DFlash2 is non-commercial: for commercial use set tensorfold_drafter to mtp or none."),
    "W_SETTINGS": ("warning", "Check the variable's name: nothing reads a misspelled setting, and its default applies."),
    "W_SERIAL": ("warning", "Give it on the command line (-e NAME=VALUE, or -e @rollout.yml) and take it out of the inventory."),
}


def severity(code):
    """Return "error" or "warning" for a known code; unknown codes are errors."""
    return CODES.get(code, ("error", ""))[0]


def problem(code, host, what, todo=None):
    """Format one problem the recipe's way: ``[CODE] host: what is wrong. What to do.``"""
    if todo is None:
        todo = CODES.get(code, ("error", ""))[1]
    what = what.rstrip()
    if what and what[-1] not in ".!?":
        what += "."
    text = "[%s] %s: %s" % (code, host, what)
    if todo:
        text += " " + todo
    return text


def record(code, host, what, todo=None, **details):
    """A problem as a dict, the shape the host checks gather and the fleet report reads."""
    entry = {
        "code": code,
        "severity": severity(code),
        "host": host,
        "message": problem(code, host, what, todo),
    }
    entry.update(details)
    return entry
