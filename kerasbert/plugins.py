"""The plugin manager: built-ins first, then every installed `kerasbert.plugins` entry point.

A broken third-party plugin (import error, bad hook result, duplicate name) is reported
with its distribution name and skipped, so the other heads keep working; so is a task that
is not a complete `kerasbert.tasks.base.Task` (naming what it lacks) or whose kind no plugin
registers.
"""

import functools
import importlib.metadata
import os

import pluggy
from absl import logging

from kerasbert import hookspecs
from kerasbert.errors import InputError
from kerasbert.tasks.base import Task, unimplemented

ENTRY_POINT_GROUP = "kerasbert.plugins"
DISABLE_AUTOLOAD_ENV = "KERASBERT_DISABLE_PLUGIN_AUTOLOAD"
# The built-in experiments' module only names them (ExperimentSpec): it imports nothing
# of the layers above this one, which each experiment loads when it is chosen.
BUILTIN_PLUGINS = ("kerasbert.kinds.builtin", "kerasbert.heads.builtin",
                   "kerasbert.tasks.builtin", "kerasbert.experiments.builtin")


class Registry:
    """Kinds, heads, tasks and experiments by name, collected from all registered plugins."""

    def __init__(self, manager: pluggy.PluginManager, distributions=None):
        self.manager = manager
        self.distributions = distributions or {}  # plugin name -> distribution name
        self.kinds = {}
        self.heads = {}
        self.tasks = {}
        self.experiments = {}
        self.problems = []  # one line per plugin that failed to load or register
        # Registration order (built-ins first), so "keeping the first" is deterministic.
        for _, plugin in manager.list_name_plugin():
            origin = self._origin(plugin)
            self._collect(plugin, origin, "kerasbert_kinds", self.kinds)
            self._collect(plugin, origin, "kerasbert_heads", self.heads)
            self._collect(plugin, origin, "kerasbert_tasks", self.tasks)
            self._collect(plugin, origin, "kerasbert_experiments", self.experiments)
        for name, (task, origin) in list(self.tasks.items()):  # kinds of every plugin known
            why_not = _unusable(task, self.kinds)
            if why_not:
                del self.tasks[name]
                self._problem(f"{origin}: task '{name}' {why_not}")
            else:  # what Task.predictions decodes with
                task.registered_kind = self.kinds[task.kind][0]

    def _origin(self, plugin):
        name = self.manager.get_name(plugin)
        if name in self.distributions:
            return f"plugin distribution '{self.distributions[name]}'"
        return f"'{name}'"

    def _collect(self, plugin, origin, hook_name, table):
        impl = getattr(plugin, hook_name, None)
        if impl is None:
            return
        try:
            items = list(impl())
        except Exception as e:  # a third-party bug must not take the others down
            if self.manager.get_name(plugin) in BUILTIN_PLUGINS:
                raise  # ours: a bug, not a plugin problem
            self._problem(f"{origin}: {hook_name}() raised {type(e).__name__}: {e}")
            return
        for item in items:
            name = getattr(item, "name", None)
            if not isinstance(name, str) or not name:
                self._problem(f"{origin}: {hook_name}() returned {item!r}, which has no name")
            elif name in table:
                self._problem(
                    f"{origin}: {hook_name[len('kerasbert_'):-1]} '{name}' is already "
                    f"registered by {table[name][1]}; keeping the first")
            else:
                table[name] = (item, origin)

    def _problem(self, line):
        self.problems.append(line)
        logging.warning("%s", line)

    def head(self, name):
        if name not in self.heads:
            raise InputError(
                f"--head={name}: unknown head; available: {', '.join(sorted(self.heads))}")
        return self.heads[name][0]

    def kind(self, name):
        if name not in self.kinds:
            raise InputError(
                f"unknown task kind {name!r}; registered: {', '.join(sorted(self.kinds))}")
        return self.kinds[name][0]

    def kind_of(self, task):
        """The TaskKind object of a task (whose `kind` is the kind's name)."""
        return self.kind(task.kind)

    def task(self, name, flag="--task"):
        """The registered task `name`; an unknown one is an InputError naming `flag`."""
        if name not in self.tasks:
            raise InputError(
                f"{flag}={name}: unknown task; available: {', '.join(sorted(self.tasks))}")
        return self.tasks[name][0]

    def experiment(self, name):
        """The registered ExperimentSpec `name`; an unknown one is an InputError listing
        the experiments."""
        if name not in self.experiments:
            raise InputError(
                f"unknown experiment {name!r}; available: {', '.join(sorted(self.experiments))}"
                " (python -m kerasbert.experiments --list)")
        return self.experiments[name][0]


def _unusable(task, kinds):
    """Why a registered task cannot run (None when it can): what the run asks of every
    task is declared by kerasbert.tasks.base.Task."""
    if not isinstance(task, Task):
        return f"is a {type(task).__name__}, not a kerasbert.tasks.base.Task"
    missing = unimplemented(task)
    if missing:
        return f"does not implement {'; '.join(missing)}"
    if task.kind not in kinds:
        return (f"is of kind {task.kind!r}, which no plugin registers "
                f"(kinds: {', '.join(sorted(kinds))})")
    return None


def _load_entry_points(manager, blocked):
    """Registers each entry point of ENTRY_POINT_GROUP; failures are reported, not raised.

    Returns (problems, {plugin name: distribution name}).
    """
    problems, distributions = [], {}
    seen = set()
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP or ep.name in seen:
                continue
            seen.add(ep.name)
            dist_name = dist.metadata["name"]
            if ep.name in blocked or dist_name in blocked:
                continue
            try:
                manager.register(ep.load(), name=ep.name)
                distributions[ep.name] = dist_name
            except Exception as e:
                problems.append(
                    f"plugin distribution '{dist_name}' (entry point '{ep.name}') failed "
                    f"to load: {type(e).__name__}: {e}")
    return problems, distributions


def make_manager(blocked=(), autoload=None):
    """A plugin manager with the built-ins and (unless disabled) installed plugins."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for module_name in BUILTIN_PLUGINS:
        manager.register(importlib.import_module(module_name), name=module_name)
    if autoload is None:
        autoload = not os.environ.get(DISABLE_AUTOLOAD_ENV)
    problems, distributions = _load_entry_points(manager, set(blocked)) if autoload else ([], {})
    return manager, problems, distributions


@functools.lru_cache(maxsize=None)
def registry(blocked=()):
    """The process-wide registry (cached; pass `blocked` as a tuple of plugin names)."""
    manager, problems, distributions = make_manager(blocked)
    reg = Registry(manager, distributions)
    for line in problems:
        reg._problem(line)
    return reg


def resolve_kind(kind, reg=None):
    """A TaskKind from itself or from its name, looked up in `reg` (default: the process's
    registry), so callers may pass `task.kind` as it is."""
    return (reg or registry()).kind(kind) if isinstance(kind, str) else kind


def _blocked_in(argv):
    """--disable_plugins must be known before plugins define their flags: pre-scan argv."""
    for i, arg in enumerate(argv):
        if arg.startswith("--disable_plugins="):
            return tuple(x for x in arg.split("=", 1)[1].split(",") if x)
        if arg == "--disable_plugins" and i + 1 < len(argv):
            return tuple(x for x in argv[i + 1].split(",") if x)
    return ()


def define_flags(flag_values, argv):
    """Lets every plugin that argv's --disable_plugins leaves on define its flags on
    `flag_values` (before they are parsed; kerasbert's CLI and the benchmarks that take its
    flags)."""
    registry(_blocked_in(argv)).manager.hook.kerasbert_define_flags(flag_values=flag_values)
