"""For the benchmarks that take every kerasbert flag (bench_padding, bench_group_by_length):
kerasbert's run flags and the plugins' own, a run's config made from them, and the command's
entry point, whose bad input is one line (kerasbert.errors.guarded) as kerasbert's own is.
"""

import logging
import sys

from absl import app

from kerasbert import flags as kb_flags  # defines the run flags
from kerasbert import plugins
from kerasbert.config import RunConfig
from kerasbert.errors import guarded

FLAGS = kb_flags.FLAGS


def run_config(task):
    """The RunConfig these flags give for `task`, its head's own flags included."""
    head = FLAGS.head or task.default_head
    return RunConfig.from_flags(FLAGS, kb_flags.head_options(FLAGS, head))


def run(main):
    """Runs `main(argv)` as the command: the plugins' flags defined, the flags parsed."""
    logging.getLogger("tensorflow").setLevel(logging.WARNING)  # checkpoint INFO lines
    plugins.define_flags(FLAGS, sys.argv)
    app.run(guarded(main))
