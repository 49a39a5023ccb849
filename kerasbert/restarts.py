"""Tables of rows repeated over seeds (restarts): per row n, mean ± sample std, min–max and
a 95% interval, and the paired difference to a baseline row with its interval.

Every experiment's table (kerasbert/experiments/: strategies, ner_table, model_size,
pretraining_ablation) and the sweep's are built here, from their runs' folders:

    rows = [{"label": "fine-tune only", "runs": {1: "out/ft/seed-1", 2: ...}}, ...]
    table = summarize(collect(rows, metric, task, task.dev_splits[0]), metric, baseline)
    markdown(table, scale=100)         # the Markdown table, with how its intervals were made
    write_outputs(folder, "comparison", table, ...)  # comparison.md + comparison.json

The 95% interval of a row is a percentile bootstrap over seeds and dev examples when every
run of the table keeps per-example dev scores (`Task.per_example_scores`; CoNLL runs:
`<split>_predictions.txt`, scored per sentence as tp/predicted/gold entities), otherwise the Student-t interval of
the mean over seeds (GLUE runs write no dev predictions); the table says which. The
difference to the baseline is paired seed by seed (the same seeds on both rows) with its
Student-t interval over the pairs, and, with per-example scores, also a paired bootstrap.
"""

import filecmp
import math
import os

from kerasbert import run_folder
from kerasbert.analysis import stats
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_json, atomic_write_text
from kerasbert.metrics import finite_value, higher_is_better

BOOTSTRAP = "bootstrap"
STUDENT_T = "t"
RESAMPLES = 2000


def _distinct(values, flag, convert, name):
    """The non-empty items of `values` (a list of strings, or one comma-separated string),
    each through `convert` (which raises the InputError naming a bad one), in order; an
    item given twice is refused as "<flag>: <name(text, value)> is given twice"."""
    if isinstance(values, str):
        values = values.split(",")
    parsed = []
    for text in (str(v).strip() for v in values):
        if not text:
            continue
        value = convert(text)
        if value in parsed:
            raise InputError(f"{flag}: {name(text, value)} is given twice")
        parsed.append(value)
    return parsed


def parse_seeds(values, default_seed, flag="--seeds"):
    """--seeds (a list of strings, or one comma-separated string) as distinct ints;
    [default_seed] when not given."""
    if values is None or values == [] or values == "":
        return [int(default_seed)]

    def seed(text):
        try:
            return int(text)
        except ValueError:
            raise InputError(f"{flag}: {text!r} is not an integer") from None

    seeds = _distinct(values, flag, seed, lambda text, value: f"seed {value}")
    if not seeds:
        raise InputError(f"{flag}: give at least one seed")
    return seeds


def parse_positive_numbers(values, flag="--learning_rates"):
    """Learning rates or epoch counts (a list of strings, or one comma-separated string)
    as distinct positive floats, in order; [] when none is given."""
    if values is None:
        return []

    def number(text):
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{flag}: {text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{flag}: {text} must be a positive number")
        return value

    return _distinct(values, flag, number, lambda text, value: text)


def baseline_label(labels, wanted, flag="--baseline"):
    """The row `wanted` names (its label, or a number equal to it: 2e-5 = 2e-05); the first
    row when None."""
    if wanted is None:
        return labels[0]
    if wanted in labels:
        return wanted
    for label in labels:
        try:
            if float(label) == float(wanted):
                return label
        except ValueError:
            pass
    raise InputError(f"{flag}={wanted}: no such row; the rows are: " + ", ".join(labels))


# --- Running the planned runs, reusing finished ones --------------------------------------

# Settings a finished run may have been made with differently and still count.
REUSABLE_CHANGES = set(run_folder.RESUMABLE_CHANGES) | {"output_dir", "deterministic"}


def seed_folder(row_folder, seed):
    """Where a row's run for one seed goes: `<row folder>/seed-<n>`."""
    return os.path.join(row_folder, f"seed-{seed}")


def _same_file(saved, wanted):
    """Two settings that name the same file or folder (a link to it) or files with the
    same bytes (a vocabulary copied into another work folder) describe the same run."""
    if not (isinstance(saved, str) and isinstance(wanted, str) and os.path.exists(saved)
            and os.path.exists(wanted)):
        return False
    if os.path.realpath(saved) == os.path.realpath(wanted):
        return True
    return (os.path.isfile(saved) and os.path.isfile(wanted)
            and filecmp.cmp(saved, wanted, shallow=False))


def check_reusable(configs):
    """A finished run folder made with other settings must not be counted as this run:
    refused, naming the setting, before anything trains. A file setting whose path changed
    but whose file did not (a link to it, or a copy with the same bytes) is the same setting."""
    for config in configs:
        if run_folder.is_finished(config.output_dir):
            changed = [(key, saved, wanted) for key, saved, wanted in run_folder.changed_settings(
                config.output_dir, config, REUSABLE_CHANGES) if not _same_file(saved, wanted)]
            if changed:
                key, saved, wanted = changed[0]
                raise InputError(
                    f"{run_folder.path(config.output_dir, run_folder.RUN_CONFIG)}: this run "
                    f"was made with {key}={saved!r}, now {wanted!r}; use another "
                    "--output_dir, or remove that folder to run it again")


def run_all(configs, execute, log=print, tool="kerasbert"):
    """Runs every config (resolved: the task's recipe filled in) whose folder holds no
    finished run; a finished one is reused, an unfinished one resumes (run.execute)."""
    check_reusable(configs)
    for i, config in enumerate(configs):
        where = f"{tool}: run {i + 1}/{len(configs)} {config.output_dir}"
        if run_folder.is_finished(config.output_dir):
            log(f"{where}: finished before, reused")
        else:
            log(f"{where}: {config.describe_seeds()}")
            execute(config)


# --- Per-example dev scores of one run ----------------------------------------------------

def per_example_scores(run_dir, task, metric, split):
    """(per-example score columns, statistic name) of a finished run's dev split, or None:
    what the run's task reads from the files the run keeps (`Task.per_example_scores`;
    CoNLL: its predictions file, scored per sentence)."""
    hook = getattr(task, "per_example_scores", None)
    return hook(run_dir, metric, split) if hook is not None else None


# --- Collecting and summarising ------------------------------------------------------------

def collect(rows, metric, task=None, split=None):
    """Reads each row's runs: {"label", "values": {seed: metric or None}, "dirs": {seed:
    folder}, "examples": {seed: columns} or None, "statistic", "failure_checks": {seed:
    failed (True, False, None: baseline unknown)} of the finished runs that recorded the
    check of `metric` (failure_check.json)}. A run that is unfinished or crashed
    (diverged) has the value None; "examples" (the task's `per_example_scores` of `split`,
    see `per_example_scores`; none without a task) is None unless every finished run has
    them."""
    collected = []
    for row in rows:
        values, examples, statistic, checks = {}, {}, None, {}
        for seed, folder in row["runs"].items():
            values[seed] = finite_value(run_folder.read_metrics(folder), metric)
            check = run_folder.read_failure_check(folder) if values[seed] is not None else None
            if check is not None and check.get("metric") == metric:
                checks[seed] = check.get("failed")
            if values[seed] is not None and task is not None:
                got = per_example_scores(folder, task, metric, split)
                if got is not None:
                    examples[seed], statistic = got
        finished = [s for s, v in values.items() if v is not None]
        complete = bool(finished) and all(s in examples for s in finished)
        collected.append({"label": row["label"], "values": values,
                          "dirs": dict(row["runs"]),
                          "examples": {s: examples[s] for s in finished} if complete else None,
                          "statistic": statistic if complete else None,
                          "failure_checks": checks,
                          **{k: v for k, v in row.items() if k not in ("label", "runs")}})
    return collected


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def summarize(collected, metric, baseline=None, resamples=RESAMPLES, level=stats.LEVEL,
              greater_is_better=None):
    """The table as a JSON-able dict: {"metric", "higher_is_better" (`greater_is_better`
    as the task declares it, kerasbert/metrics.py; None: the guess from the name), "baseline",
    "interval_method" (bootstrap or t), "level", "rows": [{"label", "seeds", "values",
    "failed", "n", "mean", "std", "min", "max", "interval": {"low", "high", "method"},
    "difference": {"baseline", "seeds", "n", "difference", "std", "low", "high",
    "method", "bootstrap": {...} or None} or None (the baseline row itself)}]}.
    "failed" lists the seeds without a result (unfinished, or crashed); a row whose runs
    recorded the failed-run check (failure_check.json: dev metric no better than the
    constant-prediction baseline + margin) also has "failures" (`failure_summary`).

    Differences are row − baseline over the seeds both rows finished."""
    labels = [r["label"] for r in collected]
    base = baseline_label(labels, baseline)
    with_values = [r for r in collected if any(v is not None for v in r["values"].values())]
    method = BOOTSTRAP if with_values and all(r["examples"] for r in with_values) else STUDENT_T
    by_label = {r["label"]: r for r in collected}
    out_rows = []
    for row in collected:
        seeds = [s for s, v in row["values"].items() if v is not None]
        values = [row["values"][s] for s in seeds]
        entry = {"label": row["label"], "seeds": seeds, "values": values,
                 "failed": [s for s, v in row["values"].items() if v is None],
                 "n": len(values), "mean": None, "std": None, "min": None, "max": None,
                 "interval": None, "difference": None,
                 "dirs": {str(s): d for s, d in row["dirs"].items()},
                 **{k: v for k, v in row.items()
                    if k not in ("label", "values", "dirs", "examples", "statistic",
                                 "failure_checks")}}
        if values:
            entry.update(stats.describe(values))
            if method == BOOTSTRAP:
                b = stats.bootstrap_interval([row["examples"][s] for s in seeds],
                                             stats.STATISTICS[row["statistic"]],
                                             resamples=resamples, level=level)
                entry["interval"] = {"low": b["low"], "high": b["high"], "method": BOOTSTRAP}
            else:
                t = stats.t_interval(values, level)
                entry["interval"] = {"low": _finite(t["low"]), "high": _finite(t["high"]),
                                     "method": STUDENT_T}
        if row["label"] != base:
            entry["difference"] = _difference(row, by_label[base], method, resamples, level)
        failures = failure_summary(row, level)
        if failures is not None:  # only then: old runs' tables stay as they were
            entry["failures"] = failures
        out_rows.append(entry)
    greater = higher_is_better(metric) if greater_is_better is None else greater_is_better
    return {"metric": metric, "higher_is_better": greater, "baseline": base,
            "interval_method": method, "level": level, "resamples": resamples,
            "rows": out_rows}


def failure_summary(row, level=stats.LEVEL):
    """How many of a collected row's finished runs failed (Mosbach et al. 2021), over the
    runs whose check has a verdict: {"count", "n", "rate", "low", "high", "method" (the
    Clopper–Pearson interval of the rate), "seeds" (those that failed), "successful":
    stats.describe of the other runs' values, or None}; None when no run has a verdict
    (runs made before the check, or a task whose baseline is unknown)."""
    judged = {seed: failed for seed, failed in (row.get("failure_checks") or {}).items()
              if failed is not None and row["values"].get(seed) is not None}
    if not judged:
        return None
    failed = [seed for seed, f in judged.items() if f]
    kept = [row["values"][seed] for seed, f in judged.items() if not f]
    return {"count": len(failed), "n": len(judged), "seeds": failed,
            **stats.proportion_interval(len(failed), len(judged), level),
            "successful": stats.describe(kept) if kept else None}


def _difference(row, base, method, resamples, level):
    seeds = [s for s, v in row["values"].items()
             if v is not None and base["values"].get(s) is not None]
    result = {"baseline": base["label"], "seeds": seeds, "n": len(seeds), "difference": None,
              "std": None, "low": None, "high": None, "method": STUDENT_T, "bootstrap": None}
    if not seeds:
        return result
    paired = stats.paired_difference([row["values"][s] for s in seeds],
                                     [base["values"][s] for s in seeds], level)
    result.update({k: _finite(paired[k]) for k in ("difference", "std", "low", "high")})
    if (method == BOOTSTRAP and row["statistic"] == base["statistic"]
            and all(len(row["examples"][s]) == len(base["examples"][s]) for s in seeds)):
        b = stats.bootstrap_interval([row["examples"][s] for s in seeds],
                                     stats.STATISTICS[row["statistic"]],
                                     [base["examples"][s] for s in seeds],
                                     resamples=resamples, level=level)
        result["bootstrap"] = {"difference": b["estimate"], "low": b["low"], "high": b["high"]}
    return result


# --- Markdown and files --------------------------------------------------------------------

def _num(x, scale, digits, sign=""):
    return "–" if x is None else f"{x * scale:{sign}.{digits}f}"


def _interval(low, high, scale, digits, sign=""):
    if low is None or high is None:
        return "–"
    return f"[{_num(low, scale, digits, sign)}, {_num(high, scale, digits, sign)}]"


def explanation(table, scale):
    """The sentence above a table: what its numbers are and how the intervals were made."""
    level = round(100 * table["level"])
    points = " (× 100)" if scale == 100 else ""
    if table["interval_method"] == BOOTSTRAP:
        how = (f"{level}% interval: percentile bootstrap over seeds and dev examples "
               f"({table['resamples']} resamples, seeds drawn first, then each seed's "
               "examples)")
    else:
        how = (f"{level}% interval: Student-t over seeds (these runs keep no per-example dev "
               "scores, so there is no bootstrap over examples)")
    text = (f"Dev {table['metric']}{points}: mean ± sample std (min–max) over seeds; {how}. "
            f"Last column: the paired difference to the baseline row "
            f"({table['baseline']}) over the seeds both finished, with its {level}% "
            "Student-t interval over the pairs"
            + (" and [the paired bootstrap interval]" if table["interval_method"] == BOOTSTRAP
               else "") + ".")
    if _has_failures(table):
        text += (f" Failed runs: dev {table['metric']} no better than the constant-prediction "
                 "baseline of the dev set plus --failure_margin (Mosbach et al. 2021), out "
                 f"of the runs judged, with the failure rate's {level}% Clopper–Pearson "
                 "interval" + ("; successful runs: the mean ± std of the others"
                               if _has_failed_run(table) else "") + ".")
    return text


def _has_failures(table):
    return any(r.get("failures") for r in table["rows"])


def _has_failed_run(table):
    return any(r.get("failures") and r["failures"]["count"] for r in table["rows"])


def _failure_columns(table, scale, digits):
    """The (header, {label: cell}) columns of the failed runs, [] for a table without
    checks (runs made before them: the table stays as it was)."""
    if not _has_failures(table):
        return []
    rates, kept = {}, {}
    for r in table["rows"]:
        f = r.get("failures")
        if not f:
            rates[r["label"]], kept[r["label"]] = "–", "–"
            continue
        rates[r["label"]] = (f"{f['count']}/{f['n']} ({100 * f['rate']:.0f}%, "
                             f"[{100 * f['low']:.0f}, {100 * f['high']:.0f}]%)")
        ok = f["successful"]
        kept[r["label"]] = "–" if ok is None else (
            _num(ok["mean"], scale, digits)
            + (f" ± {_num(ok['std'], scale, digits)}" if ok["std"] is not None else "")
            + f" (n={ok['n']})")
    level = round(100 * table["level"])
    columns = [(f"failed runs ({level}% CI)", rates)]
    if _has_failed_run(table):
        columns.append(("successful runs: mean ± std", kept))
    return columns


def markdown(table, scale=100.0, digits=1, row_header="row", extra=None):
    """The table in Markdown, the explanation first. `extra`: (header, {label: cell})
    columns added after the row's label."""
    extra = list(extra or []) + _failure_columns(table, scale, digits)
    head = [row_header] + [h for h, _ in extra] + [
        "n", "mean ± std (min–max)", f"{round(100 * table['level'])}% interval",
        f"− {table['baseline']} (paired)"]
    lines = [explanation(table, scale), "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in table["rows"]:
        cell = _num(r["mean"], scale, digits)
        if r["std"] is not None:
            cell += f" ± {_num(r['std'], scale, digits)}"
        if r["n"]:
            cell += f" ({_num(r['min'], scale, digits)}–{_num(r['max'], scale, digits)})"
        interval = r["interval"] or {}
        d = r["difference"]
        if d is None:
            diff = "baseline"
        elif d["difference"] is None:
            diff = "– (no common seeds)"
        else:
            diff = (f"{_num(d['difference'], scale, digits, '+')} "
                    f"{_interval(d['low'], d['high'], scale, digits, '+')}")
            if d["bootstrap"]:
                diff += " " + _interval(d["bootstrap"]["low"], d["bootstrap"]["high"], scale,
                                        digits, "+")
        n = str(r["n"]) + (f" ({len(r['failed'])} not finished)" if r["failed"] else "")
        lines.append("| " + " | ".join(
            [r["label"]] + [str(col.get(r["label"], "")) for _, col in extra]
            + [n, cell, _interval(interval.get("low"), interval.get("high"), scale, digits),
               diff]) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(folder, stem, tables, text, command, experiment):
    """`<stem>.md` (the text) and `<stem>.json`: {"command", "experiment", "tables":
    {name: summarize(...)}, "measured_on": measured_on()} — what the findings report reads."""
    atomic_write_text(os.path.join(folder, f"{stem}.md"), text)
    atomic_write_json(os.path.join(folder, f"{stem}.json"),
                      {"command": command, "experiment": experiment, "tables": tables,
                       "measured_on": measured_on()})


def measured_on():
    """Where and when a table was written: the machine (host name, and the kernel's boot id:
    another machine or a reboot is another session) and the UTC time. tools/findings.py
    pairs two tables as measured "in one session" from this, not from folder names."""
    import datetime
    import socket

    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
    except OSError:  # not Linux: the host name and the time still tell sessions apart
        boot_id = None
    return {"host": socket.gethostname(), "boot_id": boot_id,
            "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


EXPERIMENT_SETTINGS = ("task", "head", "data_dir", "init_checkpoint", "model_size",
                       "max_train_examples", "max_eval_examples", "max_seq_length",
                       "train_batch_size", "learning_rate", "num_train_epochs",
                       "frozen_learning_rate", "frozen_epochs")


def experiment(config, seeds, **extra):
    """What findings.py shows as a table's experiment: the data, the encoder and the budget
    of a representative run config, and the seeds. The encoder is named as the runs loaded
    it (no --init_checkpoint: the default checkpoint's folder), and --model_size only for a
    random initialisation, the one case that reads it."""
    settings = {k: getattr(config, k) for k in EXPERIMENT_SETTINGS}
    if settings["init_checkpoint"] is None:
        from kerasbert.model.encoders import default_checkpoint  # keras-hub: only when needed

        settings["init_checkpoint"] = default_checkpoint() or "random"
    if settings["init_checkpoint"] != "random":
        del settings["model_size"]
    if config.head_learning_rate is not None:  # only where a run used one
        settings["head_learning_rate"] = config.head_learning_rate
    return {**settings, "seeds": list(seeds), **extra}


def command_line(argv=None):
    """The command as it was typed, for the JSON (`python -m kerasbert.experiments NAME
    --flag ...`, `python -m kerasbert.main ...`): sys.orig_argv with the interpreter's path
    dropped."""
    import shlex
    import sys

    argv = list(argv if argv is not None else getattr(sys, "orig_argv", sys.argv))
    if argv:
        argv[0] = os.path.basename(argv[0])
    return shlex.join(argv)
