"""`python -m kerasbert.evaluate TASK ...`: score a predictions file like the official scripts.

    python -m kerasbert.evaluate squad_v1 dev-v1.1.json predictions.json
    python -m kerasbert.evaluate squad_v2 dev-v2.0.json predictions.json \\
        --na-prob-file null_odds.json [--na-prob-thresh 1.0] [--out-file eval.json]

Arguments and printed JSON are those of evaluate-v1.1.py / evaluate-v2.0.py, so existing
scripts keep working. A bad file is one line on stderr naming it, and exit code 2.

Adding a scorer is one function and one line: write `def name(parser)` that adds its
arguments and returns `run(args) -> dict | None`, and append it to `COMMANDS`. The function
name is the subcommand; the first docstring line is its help.
"""

import argparse
import json
import sys

from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text
from kerasbert.tasks import conll, squad_metrics


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

def squad_v1(parser):
    """SQuAD v1.1 exact match and F1, as evaluate-v1.1.py."""
    parser.add_argument("dataset_file", help="Dataset file (the official dev-v1.1.json).")
    parser.add_argument("prediction_file", help="Prediction file: {question id: answer}.")

    def run(args):
        expected = "1.1"
        gold, version = load_squad_gold(args.dataset_file)
        if version != expected:
            print(f"Evaluation expects v-{expected}, but got dataset with v-{version}",
                  file=sys.stderr)
        predictions = load_string_map(args.prediction_file, "prediction file", str)
        print(json.dumps(squad_metrics.evaluate_v1(gold, predictions)))

    return run


def squad_v2(parser):
    """SQuAD v2.0 exact/F1 with HasAns/NoAns splits and best thresholds, as evaluate-v2.0.py."""
    parser.add_argument("data_file", help="Input data JSON file (the official dev-v2.0.json).")
    parser.add_argument("pred_file", help="Model predictions: {question id: answer}.")
    parser.add_argument("--out-file", "-o", metavar="eval.json",
                        help="Write accuracy metrics to file (default is stdout).")
    parser.add_argument("--na-prob-file", "-n", metavar="na_prob.json",
                        help="Model estimates of probability of no answer (e.g. null_odds.json).")
    parser.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                        help='Predict "" if no-answer probability exceeds this (default = 1.0).')

    def run(args):
        gold, _ = load_squad_gold(args.data_file)
        predictions = load_string_map(args.pred_file, "prediction file", str)
        na_probs = None
        if args.na_prob_file:
            na_probs = load_string_map(args.na_prob_file, "no-answer probability file",
                                       (int, float))
        try:
            result = squad_metrics.evaluate_v2(gold, predictions, na_probs, args.na_prob_thresh)
        except ValueError as e:
            raise InputError(f"{at(args.na_prob_file)}{e}") from None
        if args.out_file:
            atomic_write_text(args.out_file, json.dumps(result))  # gs:// too; InputError if not
        else:
            print(json.dumps(result, indent=2))

    return run


def conll2003(parser):
    """CoNLL-2003 entity-level precision, recall and F1 (conlleval semantics)."""
    parser.add_argument("predictions_file", help="CoNLL-format predictions: one word per line, "
                        "the last two columns gold and predicted tag, blank lines between "
                        "sentences (kerasbert writes valid_predictions.txt).")

    def run(args):


        print(json.dumps(conll.evaluate_file(args.predictions_file), indent=2, sort_keys=True))

    return run


COMMANDS = [squad_v1, squad_v2, conll2003]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kerasbert.evaluate",
        description="Score a predictions file with a task's official metric.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="TASK")
    for command in COMMANDS:
        doc = (command.__doc__ or "").strip().splitlines()
        sub = subparsers.add_parser(command.__name__, help=doc[0] if doc else None,
                                    description=doc[0] if doc else None)
        sub.set_defaults(run=command(sub))
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except InputError as e:
        print(f"kerasbert.evaluate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
