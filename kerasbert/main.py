"""`python -m kerasbert.main --task=...`: the command line, and only that.

    absl flags → RunConfig → kerasbert.run.execute (one run), kerasbert.sweep (a grid) or
    kerasbert.stop_early (a grid whose runs stop early, the best continuing)

Bad flags, an unknown task or head, and --list_tasks / --list_heads are answered here,
before any data is read; the run itself lives in kerasbert/run.py.
"""

import dataclasses
import logging as std_logging
import os
import shlex
import sys
import time

from absl import flags, logging

from kerasbert import command
from kerasbert import config as config_lib
from kerasbert import flags as kb_flags  # noqa: F401  (defines the flags)
from kerasbert import plugins, stop_early, sweep
from kerasbert import run as run_lib
from kerasbert.errors import InputError
from kerasbert.flags import head_options

FLAGS = flags.FLAGS


# --- CLI ---------------------------------------------------------------------------------

def asks_for_sweep(flag_values):
    """Whether the flags ask for a grid of runs (kerasbert.sweep), not one run."""
    return bool(flag_values.learning_rates or flag_values.num_restarts != 1
                or flag_values.seeds)


def main(argv):
    _started.clear()
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
    output_dir_given = FLAGS.output_dir is not None
    if not output_dir_given:  # a fresh folder per run, so the bare command always works
        FLAGS.output_dir = os.path.join(
            "kerasbert_runs", f"{task.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    config = config_lib.RunConfig.from_flags(FLAGS, head_options(FLAGS, head, registry.heads))
    _started.update(output_dir=config.output_dir, output_dir_given=output_dir_given)
    if FLAGS.continue_best is not None or (config.stop_early_at is not None
                                           and asks_for_sweep(FLAGS)):
        stop_early.run_stop_early(config, FLAGS.continue_best, FLAGS.seeds, FLAGS.num_restarts,
                                  FLAGS.learning_rates, registry)
    elif asks_for_sweep(FLAGS):
        sweep.run_sweep(config, FLAGS.learning_rates, FLAGS.num_restarts, registry,
                        seeds=FLAGS.seeds, baseline=FLAGS.baseline)
    else:
        run_lib.execute(config, registry)
        for line in next_steps(config):
            print(f"kerasbert: next: {line}", flush=True)
    return 0


# --- What a user reads: the short --help, the hints, the Ctrl-C line ----------------------

_started = {}  # this process's run: its output_dir, and whether --output_dir was given


def next_steps(config):
    """The `next:` hints after a run, each true of it: the curves it wrote, the real data
    only when it ran on the bundled sample, fine-tuning further only from a trained run."""
    out = config.output_dir
    steps = []
    tensorboard = os.path.join(out, "tensorboard")
    if os.path.isdir(tensorboard):
        steps.append(f"`tensorboard --logdir {tensorboard}` for the curves")
    on_sample = (config.data_dir is None and not config.use_tfds and config.train_file is None
                 and config.predict_file is None)
    if on_sample:
        steps.append("`--data_dir=<the task's official files>` for the real data (this run "
                     "used the bundled sample)")
    if config.do_train and config.stop_early_at is None:  # a stopped run has no weights yet
        steps.append(f"`--init_checkpoint={out}` to fine-tune further from this run")
    return steps


def resume_command(args, output_dir=None, prog=None):
    """The command line that resumes this run: the same one (with --output_dir added when
    the folder was chosen by date, else a rerun would start a new one)."""
    args = list(args)
    if output_dir is not None:
        args.append(f"--output_dir={output_dir}")
    return shlex.join([*shlex.split(prog or command.prog_name()), *args])


def last_checkpoint(output_dir):
    """The newest resume checkpoint of the run in output_dir (or of a sweep's runs), or None;
    through tf.io.gfile, so a gs:// run folder is read where it is."""
    import tensorflow as tf

    newest, when = None, -1
    for pattern in ("checkpoints", "runs/*/checkpoints"):
        try:
            states = tf.io.gfile.glob(f"{output_dir}/{pattern}/checkpoint")
        except tf.errors.OpError:
            continue
        for state in states:
            try:
                with tf.io.gfile.GFile(state) as f:
                    first = f.readline()
                mtime = tf.io.gfile.stat(state).mtime_nsec
            except tf.errors.OpError:
                continue
            if first.startswith("model_checkpoint_path:") and mtime > when:
                name = first.split(":", 1)[1].strip().strip('"')
                newest, when = f"{state.rsplit('/', 1)[0]}/{name}", mtime
    return newest


def interrupted_line():
    """Ctrl-C's one line: the last checkpoint, and the command that resumes from it."""
    out = _started.get("output_dir")
    if out is None:
        return "kerasbert: interrupted before the run started; nothing was written"
    checkpoint = last_checkpoint(out)
    where = (f"last checkpoint {checkpoint}" if checkpoint
             else f"no checkpoint yet in {out} (rerunning starts the training over)")
    again = resume_command(sys.argv[1:], None if _started["output_dir_given"] else out)
    return f"kerasbert: interrupted; {where}; resume with: {again}"


def short_usage():
    """`--help`: the ~25 flags most runs use, by group, with their defaults."""
    groups = {name: [] for name in config_lib.HELP_GROUPS}
    for field in dataclasses.fields(config_lib.RunConfig):
        group = field.metadata.get("group")
        if group:
            groups[group].append((field.name, field.metadata.get("brief")))
    for name, (group, brief) in kb_flags.HELP_EXTRA.items():
        groups[group].append((name, brief))
    prog = command.prog_name()
    lines = [f"usage: {prog} --task=TASK [--flag=value ...]",
             "Fine-tunes a BERT encoder on a task, evaluates it and exports it.",
             "The flags most runs use (defaults after =):"]
    for group, members in groups.items():
        lines.append(f"{group}:")
        for name, brief in members:
            flag = FLAGS[name]
            lines.append(command.flag_line(flag, brief or command.first_sentence(flag.help)))
    lines += ["", command.FOOTER,
              "--helpfull: every flag (heads, plugins, devices, streaming, SQuAD, sweeps)."]
    return "\n".join(lines)


def define_plugin_flags():
    """Lets every plugin define its flags (before parsing); quiets TF's Python INFO logs
    (its C++ start-up lines are kept off stderr earlier: kerasbert/startup.py)."""
    std_logging.getLogger("tensorflow").setLevel(std_logging.WARNING)  # checkpoint INFO spam
    plugins.define_flags(FLAGS, sys.argv)


def run(argv=None):
    """The `kerasbert` console script and `python -m kerasbert.main`."""
    define_plugin_flags()
    sys.exit(command.run(main, FLAGS, usage=short_usage, argv=argv,
                         on_interrupt=interrupted_line))


if __name__ == "__main__":
    run()
