"""Every switch an operator sets (a role option of type bool) is read through ``| bool`` wherever
the roles judge it. Given on the command line (``-e tensorfold_ablit=false``) it is the text
"false": ``'a' if tensorfold_ablit else 'b'`` and ``not tensorfold_ablit`` then take it for true
(the Ablit weights were fetched and served so), and ansible-core 2.19 refuses it in a bare ``when``
with a message that names no setting. Role argument validation does not convert it.

Values handed on as they are (a module option, a role's vars) are left out: the module reads
them as booleans itself.
"""

import glob
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT  # noqa: E402

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def switches():
    found = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs = yaml.safe_load(handle) or {}
        for entry in (specs.get("argument_specs") or {}).values():
            found.update(name for name, option in (entry.get("options") or {}).items() if option.get("type") == "bool")
    return found


JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}")
QUOTED = re.compile(r"'[^']*'")


def judged_without_bool(text, name, template=False):
    """Lines of ``text`` where ``name`` is an operand of if/else, not/and/or, or a when item,
    not followed by ``| bool`` (a ``| default(...)`` between is fine). Words in quoted text, task
    names and comments are no use of the switch; in a template only the Jinja parts count."""
    found = []
    through_bool = r"(?!(?:\s*\|\s*default\([^)]*\))?\s*\|\s*bool)"
    operand = re.compile(r"(?:\b(?:if|not|and|or)\s+|^\s*-\s+|\bwhen:\s+)%s\b%s" % (name, through_bool))
    followed = re.compile(r"\b%s\s+(?:and|or|else)\b" % name)
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*(#|-?\s*name:)", line):
            continue
        code = QUOTED.sub("''", " ".join(JINJA.findall(line)) if template else line)
        if operand.search(code) or followed.search(code):
            found.append("%d: %s" % (number, line.strip()))
    return found


def test_the_scan_finds_each_way_a_switch_is_misread():
    for line in ("'a' if flag else 'b'", "when: flag", "    - flag", "    - not flag", "flag and x", "x or flag"):
        assert judged_without_bool(line, "flag"), line
    for line in ("'a' if flag | bool else 'b'", "when: flag | bool", "flag: \"{{ flag }}\"", "# when: flag",
                 "    - not flag | bool", "flag_other and x", "'text: flag and more'", "- name: Set flag or not",
                 "x and flag | default(true) | bool"):
        assert not judged_without_bool(line, "flag"), line
    assert judged_without_bool("{% if flag %}on{% endif %}", "flag", template=True)
    assert not judged_without_bool("Plan only (flag or --check)", "flag", template=True)


def test_every_switch_is_read_through_bool_where_it_is_judged():
    names = switches()
    assert {"tensorfold_ablit", "nvidia_toolkit_hold", "nvidia_toolkit_docker_restart"} <= names
    misread = []
    for pattern in ("roles/**/*.yml", "roles/**/*.j2", "playbooks/**/*.yml"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            if path.endswith(("argument_specs.yml", os.path.join("defaults", "main.yml"))):
                continue
            with open(path) as handle:
                text = handle.read()
            for name in names:
                misread.extend("%s:%s" % (os.path.relpath(path, ROOT), hit)
                               for hit in judged_without_bool(text, name, template=path.endswith(".j2")))
    assert not misread, "\n".join(misread)


def test_a_switch_given_as_text_on_the_command_line_reads_as_false(tmp_path):
    # What the roles rely on: the text "false" through | bool is False, and bare it is not.
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.debug:\n        msg: \"bool={{ 'ablit' if flag | bool else 'model' }} "
                    "bare={{ 'ablit' if flag else 'model' }}\"\n")
    out = subprocess.run([PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(play), "-e", "flag=false"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "bool=model bare=ablit" in out.stdout
