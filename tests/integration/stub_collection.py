"""A copy of this collection whose host-touching roles are replaced by recording stubs.

site.yml, the step guard (roles/step), the settings role (roles/tensorfold) and the fleet report
stay the real ones; each stub role notes "ROLE NOTE" in the host's log file (NOTE: what site.yml told it, STUB_NOTES), publishes the
facts the inventory gives it (``stub_facts[ROLE]``) and fails with ``stub_fail[ROLE]`` when the
inventory says so. Runs of the real site.yml against it show which steps each mode runs, how a
failure leaves the run, and what the fleet report makes of it, without GPUs or Docker.
"""

import json
import os
import shutil
import textwrap

from ansible_run import ROOT

STUBBED = ("gpu_host_checks", "nvidia_toolkit", "tensorfold_image", "weights_fetch", "fleet_plan", "rank_container",
           "smoke_test")
COPIED = ("galaxy.yml", "meta", "playbooks", "plugins", "roles", "templates")

STUB_TASKS = textwrap.dedent("""\
    ---
    - name: Note that {role}{entry} ran
      glm53.tensorfold.stub_note:
        path: "{{{{ stub_log_dir }}}}/{{{{ inventory_hostname }}}}"
        line: "{role}{entry} {{{{ {note} | default('') }}}}"
    - name: Publish the facts the real role would
      ansible.builtin.set_fact:
        "{{{{ item.key }}}}": "{{{{ item.value }}}}"
      loop: "{{{{ (stub_facts | default({{}})).get('{role}', {{}}) | dict2items }}}}"
    - name: Fail as the real role would
      ansible.builtin.fail:
        msg: "{{{{ stub_fail['{role}{entry}'] }}}}"
      when: "'{role}{entry}' in stub_fail | default({{}})"
      no_log: "{{{{ stub_no_log | default(false) }}}}"
    """)
# The note is one shell command on the host, sent by an action: a module run would cost each
# note a Python process, about half of a stubbed site.yml run's time on two cores. A host that
# cannot be reached is unreachable here, as with the real role.
STUB_NOTE_ACTION = textwrap.dedent("""\
    import shlex

    from ansible.plugins.action import ActionBase


    class ActionModule(ActionBase):
        \"\"\"Append args.line to the host's file args.path, in check mode too; never a change.\"\"\"

        def run(self, tmp=None, task_vars=None):
            result = super().run(tmp, task_vars)
            args = self._task.args
            done = self._low_level_execute_command(
                "printf '%%s\\\\n' %s >> %s" % (shlex.quote(args["line"]), shlex.quote(args["path"])))
            result.update(changed=False, rc=done["rc"], failed=done["rc"] != 0)
            return result
    """)
STUB_META = "---\ndependencies:\n  - role: glm53.tensorfold.tensorfold\n"
# Tags a stub's tasks carry beyond its play's, as the real role's do: the toolkit's checks are
# tagged check in a play tagged toolkit, so `--tags check` runs them there.
STUB_TAGS = {"nvidia_toolkit": ["check"]}
# The variable site.yml passes a stub that its log line notes (rank_container_action for the others).
STUB_NOTES = {"gpu_host_checks": "gpu_host_checks_toolkit_follows", "nvidia_toolkit": "nvidia_toolkit_runtime_required"}
# The same for a role's main entry alone: whether site.yml gave the gateway and Prometheus their fast path.
STUB_MAIN_NOTES = {"gateway": "gateway_fast_path", "monitoring": "monitoring_fast_path"}
# The fast path's read in pre-flight (the step's tasks/converged.yml) asks each box's Docker
# engine: a stub too. Each GPU box notes "step:converged" and publishes stub_facts['step'] (its
# answer, as step_converged_info); then, as the real read's one registered result does, every host
# gets them all as step_converged_info.boxes.
STUB_FAST_PATH = "---\n- when: inventory_hostname in groups.gpu_hosts | default([])\n  block:\n"
STUB_FAST_PATH_BOXES = textwrap.dedent("""\
    - name: Every host gets every box's answer, as the real read registers it
      ansible.builtin.set_fact:
        step_converged_info:
          boxes: >-
            {% set ns = namespace(found={}) %}{% for box in ansible_play_batch
              if box in groups.gpu_hosts | default([]) and hostvars[box].step_converged_info is defined %}{%
              set ns.found = ns.found | combine({box: hostvars[box].step_converged_info}) %}{% endfor %}{{ ns.found }}
      run_once: true
    """)


def stub_tasks(role, entry):
    note = STUB_MAIN_NOTES.get(role) if not entry and role in STUB_MAIN_NOTES else STUB_NOTES.get(role, "rank_container_action")
    text = STUB_TASKS.format(role=role, entry=entry, note=note)
    if role in STUB_TAGS:
        text = text.replace("\n- name:", "\n- tags: %s\n  name:" % json.dumps(STUB_TAGS[role]))
    return text


def build(tmp_path, stubbed=STUBBED):
    """Build the stub collection under tmp_path, the roles ``stubbed`` replaced; return its collections path."""
    base = tmp_path / "collections"
    coll = base / "ansible_collections" / "glm53" / "tensorfold"
    coll.mkdir(parents=True)
    for name in COPIED:
        source = os.path.join(ROOT, name)
        if os.path.isdir(source):
            shutil.copytree(source, str(coll / name))
        else:
            shutil.copy(source, str(coll / name))
    (coll / "plugins" / "action" / "stub_note.py").write_text(STUB_NOTE_ACTION)
    for role in stubbed:
        entries = sorted(f[:-4] for f in os.listdir(str(coll / "roles" / role / "tasks")) if f.endswith(".yml"))
        # The stub keeps the role's defaults (other roles' settings may default to them) and its
        # argument_specs, the settings pre-flight checks.
        for part in ("tasks", "handlers", "templates", "files", "vars"):
            shutil.rmtree(str(coll / "roles" / role / part), ignore_errors=True)
        (coll / "roles" / role / "tasks").mkdir(parents=True)
        (coll / "roles" / role / "meta" / "main.yml").write_text(STUB_META)
        (coll / "roles" / role / "tasks" / "main.yml").write_text(stub_tasks(role, ""))
        # Every task file another role or play may name with tasks_from records its entry.
        for entry in entries:
            if entry != "main":
                (coll / "roles" / role / "tasks" / (entry + ".yml")).write_text(stub_tasks(role, ":" + entry))
    if "rank_container" in stubbed:
        tasks = stub_tasks("step", ":converged").split("\n", 1)[1]
        (coll / "roles" / "step" / "tasks" / "converged.yml").write_text(
            STUB_FAST_PATH + textwrap.indent(tasks, "    ") + STUB_FAST_PATH_BOXES)
    return base


def ran(log_dir, host):
    """The stub roles that ran on host, in order: [(role, note), ...] (the note: STUB_NOTES)."""
    path = os.path.join(str(log_dir), host)
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [tuple((line.split(" ", 1) + [""])[:2]) for line in handle.read().splitlines()]
