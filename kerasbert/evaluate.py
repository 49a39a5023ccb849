"""`python -m kerasbert.evaluate TASK ...`: score a predictions file like the official scripts.

    python -m kerasbert.evaluate squad_v1 dev-v1.1.json predictions.json
    python -m kerasbert.evaluate squad_v2 dev-v2.0.json predictions.json \\
        --na-prob-file null_odds.json [--na-prob-thresh 1.0] [--out-file eval.json]

Arguments and printed JSON are those of evaluate-v1.1.py / evaluate-v2.0.py, so existing
scripts keep working. A bad file is one line on stderr naming it, and exit code 2.

Adding a scorer is one function and one line: write `def name(flag_values)` that defines
its options as absl flags on `flag_values` and returns `run(positional, ...)`, whose
parameters are the command's positional arguments, and append it to `COMMANDS`. The
function name is the subcommand; the first docstring line is its help. The options keep the
official scripts' spellings (`--na-prob-file`, `-n`); flags are parsed as in every kerasbert
command (kerasbert/command.py).
"""

import inspect
import json
import sys

from absl import flags

from kerasbert import command
from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text
from kerasbert.tasks import conll
from kerasbert.tasks.squad import metrics as squad_metrics


def load_json(path, what):
    """Parsed JSON, or an InputError naming the file (and line/column for bad syntax)."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(f"{at(path, e.lineno)}{what} is not valid JSON: {e.msg} "
                         f"(column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{at(path)}{what} is not UTF-8 ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise InputError(f"{at(path)}cannot read the {what}: {e.strerror or e}") from None


def load_squad_file(path):
    """(the parsed official SQuAD file, {id: [answer texts]}); an InputError naming the file
    when it is not in the format."""
    dataset = load_json(path, "SQuAD data file")
    try:
        return dataset, squad_metrics.gold_answers(dataset["data"])
    except (KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{at(path)}not in the SQuAD format (articles -> paragraphs -> qas "
                         f"with id and answers): {type(e).__name__} {e}") from None


def load_squad_gold(path):
    """{id: [answer texts]} from an official SQuAD file, and the file's "version"."""
    dataset, gold = load_squad_file(path)
    return gold, dataset.get("version")


def load_string_map(path, what, value_type):
    """A JSON object {question id: value of value_type}, checked entry by entry."""
    data = load_json(path, what)
    if not isinstance(data, dict):
        raise InputError(f"{at(path)}the {what} must be a JSON object {{question id: ...}}, "
                         f"not a {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(value, value_type) or isinstance(value, bool):
            raise InputError(f"{at(path)}the {what} has a {type(value).__name__} for question "
                             f"{key!r}; expected a {value_type_name(value_type)}")
    return data


def value_type_name(value_type):
    return "string" if value_type is str else "number"


# ---- subcommands -----------------------------------------------------------------------------

def squad_v1(flag_values):
    """SQuAD v1.1 exact match and F1, as evaluate-v1.1.py."""

    def run(dataset_file, prediction_file):
        """dataset_file: the official dev-v1.1.json; prediction_file: {question id: answer}."""
        expected = "1.1"
        gold, version = load_squad_gold(dataset_file)
        if version != expected:
            print(f"Evaluation expects v-{expected}, but got dataset with v-{version}",
                  file=sys.stderr)
        predictions = load_string_map(prediction_file, "prediction file", str)
        print(json.dumps(squad_metrics.evaluate_v1(gold, predictions)))

    return run


def squad_v2(flag_values):
    """SQuAD v2.0 exact/F1 with HasAns/NoAns splits and best thresholds, as evaluate-v2.0.py."""
    flags.DEFINE_string("out-file", None, "Write accuracy metrics to file (default is stdout).",
                        short_name="o", flag_values=flag_values)
    flags.DEFINE_string("na-prob-file", None, "Model estimates of probability of no answer "
                        "(e.g. null_odds.json).", short_name="n", flag_values=flag_values)
    flags.DEFINE_float("na-prob-thresh", 1.0, 'Predict "" if no-answer probability exceeds '
                       "this (default = 1.0).", short_name="t", flag_values=flag_values)

    def run(data_file, pred_file):
        """data_file: the official dev-v2.0.json; pred_file: {question id: answer}."""
        out_file = flag_values["out-file"].value
        na_prob_file = flag_values["na-prob-file"].value
        gold, _ = load_squad_gold(data_file)
        predictions = load_string_map(pred_file, "prediction file", str)
        na_probs = None
        if na_prob_file:
            na_probs = load_string_map(na_prob_file, "no-answer probability file",
                                       (int, float))
        try:
            result = squad_metrics.evaluate_v2(gold, predictions, na_probs,
                                               flag_values["na-prob-thresh"].value)
        except ValueError as e:
            raise InputError(f"{at(na_prob_file)}{e}") from None
        if out_file:
            atomic_write_text(out_file, json.dumps(result))  # gs:// too; InputError if not
        else:
            print(json.dumps(result, indent=2))

    return run


def conll2003(flag_values):
    """CoNLL-2003 entity-level precision, recall and F1 (conlleval semantics)."""

    def run(predictions_file):
        """predictions_file: CoNLL-format predictions, one word per line, the last two columns
        gold and predicted tag, blank lines between sentences (kerasbert writes
        valid_predictions.txt)."""
        print(json.dumps(conll.evaluate_file(predictions_file), indent=2, sort_keys=True))

    return run


COMMANDS = [squad_v1, squad_v2, conll2003]


PROG = "python -m kerasbert.evaluate"


def listing():
    lines = [f"usage: {PROG} TASK FILE... [options]   (TASK --help: its arguments)",
             "Score a predictions file with a task's official metric.", "", "tasks:"]
    for scorer in COMMANDS:
        lines.append(f"  {scorer.__name__:<10} {(scorer.__doc__ or '').strip().splitlines()[0]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """The command (argv: the arguments after the program's name); the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    names = [scorer.__name__ for scorer in COMMANDS]
    positional = [arg for arg in argv if not arg.startswith("-")]
    if not positional:
        print(listing(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv and set(argv) <= set(command.HELP) else 2
    name = positional[0]
    if name not in names:
        print(f"kerasbert: error: invalid choice {name!r}: TASK is one of {', '.join(names)}",
              file=sys.stderr)
        return 2
    flag_values = flags.FlagValues()
    run = COMMANDS[names.index(name)](flag_values)
    params = list(inspect.signature(run).parameters)
    doc = (COMMANDS[names.index(name)].__doc__ or "").strip().splitlines()[0]
    usage = "\n".join([f"usage: {PROG} {name} {' '.join(params)} [options]", doc, "",
                       inspect.getdoc(run) or "", "", command.flags_usage(flag_values)]).rstrip()

    def entry(args):
        given = args[2:]  # after the program and the task's name
        if len(given) != len(params):
            raise InputError(f"{name}: expected {len(params)} argument(s), {' '.join(params)}; "
                             f"got {len(given)}" + (f": {' '.join(given)}" if given else ""))
        run(*given)
        return 0

    argv.remove(name)
    return command.run(entry, flag_values, usage=usage, argv=[PROG, name, *argv])


if __name__ == "__main__":
    sys.exit(main())
