"""Helpers for pytest files that run real ansible-playbook on this controller."""

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def run_playbook(playbook, inventory, cwd, extra_args=(), env=None, timeout=300):
    """Run ansible-playbook with the collection from this checkout; return (rc, output)."""
    full_env = dict(os.environ)
    full_env.update({
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_STDOUT_CALLBACK": "default",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
    })
    full_env.update(env or {})
    proc = subprocess.run([PLAYBOOK_BIN, "-i", str(inventory), str(playbook)] + list(extra_args),
                          cwd=str(cwd), env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


def start_playbook(playbook, inventory, cwd, extra_env=None):
    """Start ansible-playbook in a process group of its own, so a test can kill the whole run
    (as an operator's Ctrl-C or kill -9 would); return the Popen."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), **(extra_env or {}))
    return subprocess.Popen([PLAYBOOK_BIN, "-i", str(inventory), str(playbook)], cwd=str(cwd), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def module_processes(*modules):
    """PIDs on this machine running one of these modules (``AnsiballZ_NAME.py``), Ansible's async
    wrapper around them included."""
    wanted = [("AnsiballZ_%s.py" % name).encode() for name in modules]
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmd = handle.read()
        except OSError:
            continue
        if any(name in cmd for name in wanted):
            found.add(int(pid))
    return found
