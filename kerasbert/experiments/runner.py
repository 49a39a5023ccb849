"""The one way an experiment runs: rows over seeds, each (row, seed) an ordinary kerasbert
run, then one table with intervals.

    rows = [(label, runner.seed_runs(base, task, folder, seeds, **changes)), ...]
    runner.run_rows(rows, "my_experiment", baseline)     # reuses finished runs
    table = runner.summarize(rows, metric, task, task.dev_splits[0], baseline)
    runner.publish(output_dir, "table", {task.name: table}, text, experiment)

A row is `(label, {seed: resolved RunConfig})`; its runs go to `<row folder>/seed-<n>/`.
Every run has a process of its own (`run.execute_in_own_process`: TensorFlow keeps what a
finished run held), a finished run is reused and an unfinished one resumes, and a finished
run made with other settings is refused before anything trains. The arithmetic and the
Markdown are kerasbert/restarts.py's, shared with the sweep: n, mean ± sample std, min–max,
a 95% interval, the paired difference to the baseline row. `publish` writes `<stem>.md`
and `<stem>.json` (with the command and the `measured_on` record the findings read) and
echoes the Markdown.

`command(entry, define_flags)` makes an experiment's `run(argv)` on kerasbert.main's flags
(the plugins' included) and the one error guard every kerasbert command has.
"""

import dataclasses
import sys

from kerasbert import evp_report, metrics, restarts
from kerasbert.errors import InputError


def from_flags(flag_values):
    """(task, base RunConfig, seeds) from kerasbert.main's flags: the task, the chosen head's
    own flags (not those of another head whose name begins the same: tagger's are not
    tagger_crf's) and --seeds (default: --seed)."""
    from kerasbert import plugins
    from kerasbert.config import RunConfig
    from kerasbert.flags import head_options

    registry = plugins.registry()
    task = registry.task(flag_values.task)
    head = flag_values.head or task.default_head
    base = RunConfig.from_flags(flag_values, head_options(flag_values, head, registry.heads))
    return task, base, parse_seeds(flag_values.seeds, base.seed)


def parse_seeds(values, default_seed):
    """--seeds as distinct ints ([default_seed] when not given)."""
    return restarts.parse_seeds(values, default_seed)


def seed_runs(base, task, folder, seeds, **changes):
    """{seed: `base` with `changes` and that seed (in place of --seed, or of the part
    --vary_seed names), in `<folder>/seed-<n>`, resolved for `task`}.
    A row's runs never overwrite: a finished one is reused."""
    return {seed: dataclasses.replace(
        base.for_restart(seed), output_dir=restarts.seed_folder(folder, seed),
        overwrite_output_dir=False, **changes).resolved(task) for seed in seeds}


def labels(rows):
    return [label for label, _ in rows]


def configs(rows):
    """Every run of the rows, row by row."""
    return [config for _, runs in rows for config in runs.values()]


def run_rows(rows, tool, baseline=None, execute=None, log=print):
    """Checks --baseline names a row, then runs every (row, seed) not finished before, each
    in a process of its own unless `execute` says otherwise (restarts.run_all)."""
    restarts.baseline_label(labels(rows), baseline)  # a bad --baseline, before any run
    if execute is None:
        from kerasbert import run as run_lib  # TensorFlow: only when something runs

        execute = run_lib.execute_in_own_process
    restarts.run_all(configs(rows), execute, log=log, tool=tool)


def summarize(rows, metric, task=None, split=None, baseline=None, info=None):
    """The restarts table (restarts.summarize) of the rows' finished runs, ranked in the
    direction `task` declares for `metric` (kerasbert/metrics.py) and with its per-example
    scores of `split` where it supplies them; `info`: {label: extra keys} each row of the
    table keeps (e.g. a size's parameters)."""
    info = info or {}
    collected = restarts.collect(
        [{"label": label, "runs": {s: c.output_dir for s, c in runs.items()},
          **info.get(label, {})} for label, runs in rows], metric, task, split)
    greater = (metrics.greater_is_better(metric, task, getattr(task, "registered_kind", None))
               if task is not None else None)
    return restarts.summarize(collected, metric, baseline, greater_is_better=greater)


def publish(folder, stem, tables, text, experiment):
    """`<stem>.md` (the text) and `<stem>.json` ({"command", "experiment", "tables",
    "measured_on"}) in `folder`, and the text on stdout; beside them evp.json, evp.md and
    evp.png: each row's expected validation performance (kerasbert/evp_report.py)."""
    restarts.write_outputs(folder, stem, tables, text, restarts.command_line(), experiment)
    evp_report.write(folder, tables)
    sys.stdout.write(text)


def no_arguments(argv):
    """An experiment takes flags only."""
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")


# --- The command ---------------------------------------------------------------------------

def command(entry, define_flags=None):
    """`run(argv)` of an experiment on kerasbert.main's flags: the plugins' flags and
    `define_flags(flag_values)` (the experiment's own, defined once per process) are
    defined, argv parsed (a bad flag: one line, exit 2), then `entry(argv)` runs under
    errors.guarded (--verbose keeps the traceback); returns the exit status."""

    def run(argv):
        from kerasbert import command
        from kerasbert import main as kb_main  # the run flags; TensorFlow

        kb_main.define_plugin_flags()
        if define_flags is not None:
            define_flags(kb_main.FLAGS)
        return command.run(entry, kb_main.FLAGS, argv=list(argv),
                           usage=lambda: usage(entry.__module__, kb_main.FLAGS))

    return run


def usage(module_name, flag_values):
    """An experiment's --help: its module's docstring and its own flags (kerasbert.main's
    are all taken too: --helpfull lists them)."""
    text = sys.modules[module_name].__doc__.strip()
    own = flag_values.module_help(module_name)
    if own:
        text += "\n\n" + own
    return text + "\n\nEvery kerasbert.main flag is taken too (--helpfull lists them all)."
