"""`python -m kerasbert.main --task=...`: the command line, and only that.

    absl flags → RunConfig → kerasbert.run.execute (one run) or kerasbert.sweep (a grid)

Bad flags, an unknown task or head, and --list_tasks / --list_heads are answered here,
before any data is read; the run itself lives in kerasbert/run.py.
"""

import logging as std_logging
import os
import sys
import time

from absl import app, flags, logging

from kerasbert import config as config_lib
from kerasbert import flags as kb_flags  # noqa: F401  (defines the flags)
from kerasbert import plugins, sweep
from kerasbert import run as run_lib
from kerasbert.errors import InputError, guarded

FLAGS = flags.FLAGS


# --- CLI ---------------------------------------------------------------------------------

def _blocked_plugins(argv):
    """--disable_plugins must be known before plugins define their flags: pre-scan argv."""
    for i, arg in enumerate(argv):
        if arg.startswith("--disable_plugins="):
            return tuple(x for x in arg.split("=", 1)[1].split(",") if x)
        if arg == "--disable_plugins" and i + 1 < len(argv):
            return tuple(x for x in argv[i + 1].split(",") if x)
    return ()


def head_options(flag_values, head_name, heads=()):
    """The head's own flags: those named `<head_name>_...`, but not another head's whose
    name begins so too (tagger's are not tagger_crf's, bimpm's not bimpm_no_context's)."""
    prefix = head_name + "_"
    others = tuple(f"{h}_" for h in heads if h.startswith(prefix))
    return {name: flag_values[name].value for name in flag_values
            if name.startswith(prefix) and not name.startswith(others)}


def asks_for_sweep(flag_values):
    """Whether the flags ask for a grid of runs (kerasbert.sweep), not one run."""
    return bool(flag_values.learning_rates or flag_values.num_restarts != 1
                or flag_values.seeds)


def main(argv):
    if not FLAGS["verbosity"].present:  # our progress lines go to stdout; keep TF's INFO out
        logging.set_verbosity(logging.WARNING)
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    registry = plugins.registry(tuple(FLAGS.disable_plugins))
    if FLAGS.list_tasks or FLAGS.list_heads:
        table = registry.tasks if FLAGS.list_tasks else registry.heads
        for name, (item, origin) in sorted(table.items()):
            detail = getattr(item, "description", "") or getattr(item, "kind", "")
            print(f"{name:20s} {detail}  [{origin}]")
        return 0
    if FLAGS.task is None:
        raise InputError("--task: required (see --list_tasks)")
    if FLAGS.version_2_with_negative and FLAGS.task in ("squad", "squad_v1"):
        FLAGS.task = "squad_v2"
    elif FLAGS.task == "squad":
        FLAGS.task = "squad_v1"
    task = registry.task(FLAGS.task)
    head = FLAGS.head or task.default_head
    if FLAGS.output_dir is None:  # a fresh folder per run, so the bare command always works
        FLAGS.output_dir = os.path.join(
            "kerasbert_runs", f"{task.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    config = config_lib.RunConfig.from_flags(FLAGS, head_options(FLAGS, head, registry.heads))
    if asks_for_sweep(FLAGS):
        sweep.run_sweep(config, FLAGS.learning_rates, FLAGS.num_restarts, registry,
                        seeds=FLAGS.seeds, baseline=FLAGS.baseline)
    else:
        run_lib.execute(config, registry)
    return 0


def define_plugin_flags():
    """Lets every plugin define its flags (before parsing); quiets TF's Python INFO logs
    (its C++ start-up lines are kept off stderr earlier: kerasbert/startup.py)."""
    std_logging.getLogger("tensorflow").setLevel(std_logging.WARNING)  # checkpoint INFO spam
    registry = plugins.registry(_blocked_plugins(sys.argv))
    registry.manager.hook.kerasbert_define_flags(flag_values=FLAGS)


def run_tool(entry):
    """A tool's absl entry point on these flags (the benchmarks; an experiment's is
    kerasbert.experiments.runner.command): the plugins' flags, and bad input as one line,
    exit 2."""
    define_plugin_flags()
    app.run(guarded(entry))


def run():
    define_plugin_flags()

    def flags_parser(argv):
        try:
            return FLAGS(argv)
        except flags.Error as e:
            print(f"kerasbert: error: {e}", file=sys.stderr)
            sys.exit(2)

    app.run(guarded(main, reraise=lambda: FLAGS.verbose), flags_parser=flags_parser)


if __name__ == "__main__":
    run()
