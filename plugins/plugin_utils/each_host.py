# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Run a task on each of several hosts from the one worker of a ``run_once`` task.

A task costs the controller one worker per host: a fork of the whole controller (about 15 ms on a
2-core machine), the worker's own start, its result sent back and judged. For a read that every box
of the batch takes in every run (the fast path's converged_info), that is most of what a converged
box costs the controller. Here the first host's worker runs the same task for each host in threads,
each through ansible-core's own TaskExecutor with that host's variables: the same connection and
become, the same templating of the task's arguments, as if the host had its own worker. The
task's conditions were judged once, when the batch reached it. Only the workers, their results'
trips and the controller's per-host bookkeeping are saved (docs/development.md, "One worker reads
the batch").

The reads of one process share its interpreter lock, and templating a host's arguments is Python
(about 40 ms a host here): with many hosts the worker forks, as Ansible forks its workers, and each
process reads its share of them in threads of its own (``shards``), the results sent back through
a pipe. A share whose process gives no answer is read again by the worker itself.

It leans on what a worker process holds (``ansible.executor.process.worker.current_worker``), so
``run_each`` returns None where that is missing (another ansible-core, a task not run by a worker,
a loop or a timeout on the task) and the caller answers for its own host only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import contextvars
import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

from ansible import context
from ansible.executor.task_executor import TaskExecutor
from ansible.playbook.task import Task
from ansible.utils.display import Display

try:  # ansible-core 2.19's per-thread state of a task run (a worker process has one of each)
    from ansible._internal import _task
    from ansible._internal._templating import _access
except ImportError:  # pragma: no cover  (before 2.19: no such state)
    _task = _access = None


display = Display()

# At least this many hosts a process: a fork costs about what one host's read does.
SHARD_HOSTS = 8


def shards(names, cpus):
    """``names`` dealt out to the processes that read them: one per SHARD_HOSTS hosts, at most one
    per CPU; the first share is the worker's own."""
    count = max(1, min(cpus or 1, len(names) // SHARD_HOSTS))
    return [names[start::count] for start in range(count)]


def _fork(read, names):
    """Read ``names`` in a child process; return (pid, the read end of its pipe). The child sends
    its pickled {host: result} and ends at once (no cleanup of what it shares with the worker)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child; its answer is what the tests read)
        code = 1
        try:
            os.close(read_end)
            data = pickle.dumps(read(names))
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)  # pylint: disable=protected-access
    os.close(write_end)
    return pid, read_end


def _collect(pid, read_end):
    """The child's {host: result}, or None when it gave none."""
    with os.fdopen(read_end, "rb") as source:
        data = source.read()
    os.waitpid(pid, 0)
    try:
        answer = pickle.loads(data) if data else None
    except Exception:  # pylint: disable=broad-except  # a truncated answer: read again
        return None
    return answer if isinstance(answer, dict) else None


def _worker():
    try:
        from ansible.executor.process import worker
    except ImportError:  # pragma: no cover  (every ansible-core this collection supports has it)
        return None
    current = getattr(worker, "current_worker", None)
    needed = ("_play_context", "_loader", "_shared_loader_obj", "_final_q", "_variable_manager")
    if current is None or not all(hasattr(current, name) for name in needed):
        return None
    return current


def run_each(action, task_vars, hosts, drop=("hosts",)):
    """{host: result} of ``action``'s task run on each of ``hosts`` (inventory names), its
    arguments in ``drop`` left out, each run the way a worker of that host would run it; None where
    this process is not a worker that can. A host missing from the inventory gets a failed result."""
    worker = _worker()
    if worker is None or action._task.loop or action._task.timeout:  # pylint: disable=protected-access
        return None
    manager = worker._variable_manager  # pylint: disable=protected-access
    inventory = getattr(manager, "_inventory", None)
    if inventory is None:
        return None
    play = action._task.get_play()  # pylint: disable=protected-access
    raw = action._task.get_ds()  # pylint: disable=protected-access  # the task as written: each host templates it anew
    play_hosts = task_vars.get("ansible_play_hosts_all")
    batch = task_vars.get("ansible_play_batch")

    def one(name):
        host = inventory.get_host(name)
        if host is None:
            return {"failed": True, "msg": "%s is not in the inventory" % name}
        task = Task.load(raw, block=action._task._parent, role=action._task._role,  # pylint: disable=protected-access
                         variable_manager=manager, loader=action._loader)  # pylint: disable=protected-access
        # The task's conditions (its own and those it inherits) were judged for the batch when the
        # task was reached; which hosts it runs on is ``hosts``. Not judged again per host.
        task.squash()
        task.when = []
        task.run_once = False
        for name_dropped in drop:
            task.args.pop(name_dropped, None)
        job_vars = manager.get_vars(play=play, host=host, task=task, _hosts=batch, _hosts_all=play_hosts)
        # What a worker of its own would give the run: the task as the current one, and a fresh
        # broker of the templar's access notes (the one this thread inherits is the first host's).
        if _access is not None:
            _access.AnsibleAccessContext._contextvar.set(_access.AnsibleAccessContext())  # pylint: disable=protected-access
        with (_task.TaskContext(task) if _task is not None else contextlib.nullcontext()):
            return TaskExecutor(host, task, job_vars, worker._play_context, worker._loader,  # pylint: disable=protected-access
                                worker._shared_loader_obj, worker._final_q, manager).run()  # pylint: disable=protected-access

    def answer(name):
        # One host's trouble before its executor runs (its variables do not template, say) is that
        # host's failed result: it must not fail the host whose worker this is.
        try:
            return contextvars.copy_context().run(one, name)
        except Exception as exc:  # pylint: disable=broad-except
            return {"failed": True, "msg": "%s: %s" % (type(exc).__name__, exc)}

    def read(names):
        if len(names) <= 1:
            return dict((name, answer(name)) for name in names)
        threads = max(1, min(len(names), int(context.CLIARGS.get("forks") or 5)))
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = dict((name, pool.submit(answer, name)) for name in names)
            return dict((name, future.result()) for name, future in futures.items())

    names = list(dict.fromkeys(hosts))
    own, *others = shards(names, os.cpu_count())
    if others and threading.active_count() > 1:
        # A fork copies only this thread; a lock another thread holds would stay held in the child.
        own, others = names, []
    display.vvv("each_host: %d hosts read by %d processes" % (len(names), 1 + len(others)))
    # Forked before this process starts a thread of its own.
    children = [(share, _fork(read, share)) for share in others]
    results = read(own)
    for share, (pid, read_end) in children:
        results.update(_collect(pid, read_end) or read(share))
    return dict((name, results[name]) for name in names)
