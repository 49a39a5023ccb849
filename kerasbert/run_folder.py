"""The layout of a run folder and of a sweep folder: every file and sub-folder name, and
the readers and writers of a run's config, metrics, history and eval results.

    <run>/  run_config.json   the RunConfig the run was started with (written first)
            history.csv       one row per epoch (phase, step, losses, dev metrics, seconds so
                              far, and eval_seconds: that epoch's dev evaluation)
            eval_results.txt  `name = value` per dev metric (google-research/bert's file)
            metrics.json      the final dev metrics: written last, the finished marker
            model.weights.h5  encoder + head;  encoder/  the fine-tuned encoder alone
            checkpoints/      resume state;    tensorboard/   event files
            trajectory/       weights along training (--save_trajectory_every)
            export.json       where the run's SavedModel went (--export_dir)
            report.md, curves.png, failed.json (a sweep's diverged run), sweep_pruned.json
    <sweep>/ runs/<lr…-r…>/ (one run folder each), sweep.json, sweep.csv, sweep.png, report.md

Nothing else in kerasbert spells these names: a module that reads or writes a run's
files asks this one.
"""

import dataclasses
import json
import os
import shutil

from kerasbert.config import RunConfig
from kerasbert.errors import InputError, at
from kerasbert.io_utils import (
    atomic_write_json,
    atomic_write_text,
    read_history,
    read_json_object,
    write_history,
)

# --- A run folder ------------------------------------------------------------------------
RUN_CONFIG = "run_config.json"
METRICS = "metrics.json"  # written last: a run folder with it holds a finished run
EVAL_RESULTS = "eval_results.txt"
HISTORY = "history.csv"
MODEL_WEIGHTS = "model.weights.h5"
EXPORT_RECORD = "export.json"
REPORT = "report.md"
CURVES = "curves.png"
FAILED = "failed.json"
PRUNED = "sweep_pruned.json"  # written by a sweep when it dropped a run's large files
ENCODER_DIR = "encoder"
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
TRAJECTORY_DIR = "trajectory"
# Inside checkpoints/: what a resumed run needs besides the TF checkpoint itself.
BEST_HEAD = "best_head.npz"  # the frozen phase's best head (--frozen_patience)
PHASE_METRICS = "phases.json"  # dev metrics at the end of each finished phase

# The small files that say what a run did (a sweep keeps them when it prunes a run).
SUMMARY_FILES = (RUN_CONFIG, METRICS, EVAL_RESULTS, HISTORY, REPORT, CURVES, PRUNED, FAILED)
FOLDER_ROLES = {TENSORBOARD_DIR: "TensorBoard events (`tensorboard --logdir` this folder)",
                CHECKPOINT_DIR: "resume state (latest epoch)",
                ENCODER_DIR: "the fine-tuned encoder (`--init_checkpoint=` this run)"}

# --- A sweep folder ----------------------------------------------------------------------
SWEEP_RUNS = "runs"
SWEEP_JSON = "sweep.json"
SWEEP_CSV = "sweep.csv"
SWEEP_PNG = "sweep.png"


def path(run_dir, name):
    """The path of one of the run's files or folders (a name of this module)."""
    return os.path.join(run_dir, name)


def predictions_file(split):
    """Where an unlabelled split's predictions go: GLUE's submission name for `test`."""
    return "test_results.tsv" if split == "test" else f"{split}_results.tsv"


def status(run_dir):
    """finished (metrics.json), failed (failed.json), unfinished (run_config.json only)
    or pending (nothing yet)."""
    if os.path.isfile(path(run_dir, METRICS)):
        return "finished"
    if os.path.isfile(path(run_dir, FAILED)):
        return "failed"
    if os.path.isfile(path(run_dir, RUN_CONFIG)):
        return "unfinished"
    return "pending"


def is_finished(run_dir):
    return os.path.isfile(path(run_dir, METRICS))


# --- Readers and writers -----------------------------------------------------------------

def read_config(run_dir):
    """run_config.json as a dict ({} when the folder has none)."""
    file = path(run_dir, RUN_CONFIG)
    return read_json_object(file) if os.path.isfile(file) else {}


def read_run_config(run_dir):
    """run_config.json as a RunConfig. Paths of the training data are not needed to export
    (the vocabulary comes from the run's encoder/), so their absence is no error."""
    path = os.path.join(run_dir, RUN_CONFIG)
    if not os.path.isfile(path):
        raise InputError(f"{at(path)}missing: --run_dir must be a finished kerasbert run")
    values = read_json_object(path)
    known = {f.name for f in dataclasses.fields(RunConfig)}
    values = {k: v for k, v in values.items() if k in known}  # a newer run's extra settings
    values.update(data_dir=None, tfds_data_dir=None, vocab_file=None, train_file=None,
                  predict_file=None)
    try:
        return RunConfig(**values)
    except TypeError as e:  # a required field is missing
        raise InputError(f"{at(path)}not a kerasbert run config: {e}") from None
    except InputError as e:
        raise InputError(f"{at(path)}{e}") from None


def write_config(run_dir, config):
    atomic_write_json(path(run_dir, RUN_CONFIG), config.to_dict())


def read_metrics(run_dir):
    """metrics.json ({} for an unfinished run). Stack-and-finetune runs also hold each
    phase's metrics under "phases"."""
    file = path(run_dir, METRICS)
    return read_json_object(file) if os.path.isfile(file) else {}


def write_metrics(run_dir, metrics, per_phase=None):
    """The finished marker: final dev metrics, plus each phase's when there were several."""
    atomic_write_json(path(run_dir, METRICS),
                      {**metrics, "phases": per_phase} if per_phase and len(per_phase) > 1
                      else metrics)


def read_eval_results(run_dir):
    """eval_results.txt as {name: float} ({} when absent). It exists before metrics.json
    (a run exports in between, so that a kill during export resumes to it)."""
    file = path(run_dir, EVAL_RESULTS)
    results = {}
    if os.path.isfile(file):
        with open(file, encoding="utf-8") as f:
            for line in f:
                name, sep, value = line.strip().partition(" = ")
                if sep:
                    try:
                        results[name] = float(value)
                    except ValueError:
                        continue
    return results


def write_eval_results(run_dir, metrics):
    atomic_write_text(path(run_dir, EVAL_RESULTS),
                      "".join(f"{k} = {v}\n" for k, v in sorted(metrics.items())))


def read_run_history(run_dir):
    """history.csv as a list of dict rows (strings), [] when absent."""
    return read_history(path(run_dir, HISTORY))


def write_run_history(run_dir, rows):
    write_history(path(run_dir, HISTORY), rows)


def read_failure(run_dir):
    return read_json_object(path(run_dir, FAILED)).get("error", "?")


def write_failure(run_dir, error):
    atomic_write_json(path(run_dir, FAILED), {"error": str(error)})


def read_export_record(run_dir):
    """The SavedModel folder a run exported to, or None."""
    file = path(run_dir, EXPORT_RECORD)
    return read_json_object(file).get("path") if os.path.isfile(file) else None


def write_export_record(run_dir, export_path):
    atomic_write_json(path(run_dir, EXPORT_RECORD), {"path": export_path})


def read_pruned(run_dir):
    file = path(run_dir, PRUNED)
    return read_json_object(file).get("removed", []) if os.path.isfile(file) else []


def write_pruned(run_dir, removed):
    atomic_write_json(path(run_dir, PRUNED), {"removed": sorted(removed)})


# --- Preparing a folder for a run --------------------------------------------------------

def changed_settings(run_dir, config, may_change):
    """(name, saved, now) of each setting, in the config's order, that the run in
    `run_dir` was started with and `config` now gives differently, leaving out the names
    in `may_change`."""
    saved = read_config(run_dir)
    now = json.loads(json.dumps(config.to_dict()))
    return [(k, saved[k], v) for k, v in now.items()
            if k not in may_change and k in saved and saved[k] != v]


# Differences in these settings do not stop an unfinished run from resuming.
RESUMABLE_CHANGES = ("overwrite_output_dir", "do_predict", "export_dir", "eval_batch_size",
                     "save_checkpoints_steps")


def prepare(config):
    """Makes --output_dir ready: a new or empty folder is used; an unfinished run with the
    same settings resumes; a finished run, one with other settings, or a folder of other
    files needs --overwrite_output_dir (which removes a kerasbert run's files, never
    anyone else's)."""
    out = config.output_dir
    finished = is_finished(out)
    is_run = os.path.exists(path(out, RUN_CONFIG))
    foreign = os.path.isdir(out) and bool(os.listdir(out)) and not is_run and not finished
    if not config.overwrite_output_dir:
        if finished:
            raise InputError(f"--output_dir={out}: holds a finished run; pass "
                             "--overwrite_output_dir to start over")
        if foreign:
            raise InputError(f"--output_dir={out}: not empty and not a kerasbert run; pass "
                             "--overwrite_output_dir to write into it anyway")
        if is_run:
            changed = changed_settings(out, config, RESUMABLE_CHANGES)
            if changed:
                k, saved, now = changed[0]
                raise InputError(
                    f"--output_dir={out}: holds an unfinished run started with "
                    f"--{k}={saved} (now {now}); use the same flags to resume it, or pass "
                    "--overwrite_output_dir to start over")
    try:
        os.makedirs(out, exist_ok=True)
        probe = path(out, ".write_test")
        with open(probe, "w") as f:
            f.write("")
        os.remove(probe)
    except OSError as e:
        raise InputError(f"--output_dir={out}: cannot write there ({e.strerror})") from None
    if config.overwrite_output_dir and (finished or is_run):
        # Start over: the old run's results and checkpoints must not mix with the new.
        clear(out, os.listdir(out))


def clear(folder, names):
    """Removes the named files and folders of `folder` (those that exist)."""
    for name in names:
        target = path(folder, name)
        if os.path.isdir(target):
            shutil.rmtree(target)
        elif os.path.exists(target):
            os.remove(target)
