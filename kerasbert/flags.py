"""Command-line flags. Names follow google-research/bert's run_classifier.py / run_squad.py,
so commands users already type keep working; everything else is kerasbert's own.

Each RunConfig field is a flag made from its declaration in kerasbert/config.py (type,
default, help, choices), so the two cannot drift; only the CLI-only flags are defined here.
"""

import dataclasses
import typing

from absl import flags

from kerasbert.config import RunConfig

FLAGS = flags.FLAGS
_DEFINE = {str: flags.DEFINE_string, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           bool: flags.DEFINE_boolean}


def _define_run_config_flags():
    hints = typing.get_type_hints(RunConfig)
    for field in dataclasses.fields(RunConfig):
        if "help" not in field.metadata:  # head_options: the head's own flags, not one flag
            continue
        # A required field's flag defaults to None: RunConfig then names it as missing.
        default = None if field.default is dataclasses.MISSING else field.default
        help, choices = field.metadata["help"], field.metadata["choices"]
        if choices:
            flags.DEFINE_enum(field.name, default, list(choices), help)
        else:
            kind = hints[field.name]
            if typing.get_args(kind):  # X | None: an X flag whose default is None
                kind, = set(typing.get_args(kind)) - {type(None)}
            _DEFINE[kind](field.name, default, help)


_define_run_config_flags()


def head_options(flag_values, head_name, heads=()):
    """The head's own flags: those named `<head_name>_...`, but not another head's whose
    name begins so too (tagger's are not tagger_crf's, bimpm's not bimpm_no_context's)."""
    prefix = head_name + "_"
    others = tuple(f"{h}_" for h in heads if h.startswith(prefix))
    return {name: flag_values[name].value for name in flag_values
            if name.startswith(prefix) and not name.startswith(others)}


# --- CLI only: not part of a run's config ------------------------------------------------
flags.DEFINE_boolean("list_tasks", False, "Print the registered tasks and exit.")
flags.DEFINE_boolean("list_heads", False, "Print the registered heads and exit.")
flags.DEFINE_list("disable_plugins", [], "Names of plugins (entry point or distribution names) "
                  "not to load.")

# --- Sweeps (kerasbert/sweep.py) ---------------------------------------------------------
flags.DEFINE_list("learning_rates", None, "Sweep: one fine-tuning run per learning rate (the "
                  "paper's 5e-5,4e-5,3e-5,2e-5) and --num_restarts each, into "
                  "<output_dir>/runs/; the best on dev is kept in full.")
flags.DEFINE_integer("num_restarts", 1, "Sweep: random restarts per learning rate, with seeds "
                     "--seed, --seed+1, ... (data order, head initialisation and dropout; "
                     "--vary_seed picks one).")
flags.DEFINE_list("seeds", None, "Restarts: one run per seed, e.g. 1,2,3 (a sweep: per "
                  "learning rate, instead of --num_restarts; an experiment's table "
                  "(python -m kerasbert.experiments): per row). Default: --seed (a sweep: "
                  "--seed, --seed+1, ... for --num_restarts).")
flags.DEFINE_string("baseline", None, "Restarts tables (sweep, experiments): the row the others "
                    "are compared with, paired seed by seed; default: the first row.")
flags.DEFINE_integer("continue_best", None, "Start many, stop early (kerasbert/stop_early.py): "
                     "with --stop_early_at=F and several runs (--seeds, --num_restarts, "
                     "--learning_rates), every run stops after F of its steps and only the K "
                     "best on dev continue to the end (0: none, all stay stopped).")
flags.DEFINE_boolean("verbose", False, "Print full tracebacks for input errors.")

# The CLI-only flags of the short --help (RunConfig's come from their `group` metadata).
HELP_EXTRA = {
    "list_tasks": ("task and data", "Print the registered tasks and exit."),
    "list_heads": ("model", "Print the registered heads and exit."),
    "learning_rates": ("training", "Sweep: one run per learning rate, e.g. 5e-5,3e-5,2e-5."),
}
