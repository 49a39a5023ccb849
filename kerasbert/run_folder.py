"""The layout of a run folder and of a sweep folder: every file and sub-folder name, and
the readers and writers of a run's config, metrics, history and eval results.

    <run>/  run_config.json   the RunConfig the run was started with (written first)
            history.csv       one row per epoch (phase, step, losses, dev metrics, seconds so
                              far, eval_seconds: that epoch's dev evaluation, and
                              trained_parameters: how many the phase's optimizer updates,
                              peak_rss_mb: the process's peak resident MiB in the phase so
                              far, where Linux lets it be measured; with
                              --grad_norm_every, grad_norm/<group>: the epoch's mean gradient
                              norm per group, grad_norm_last/<group>: its last step's)
            grad_norms.csv    the gradient norms per group every --grad_norm_every steps
            eval_results.txt  `name = value` per dev metric (google-research/bert's file)
            metrics.json      the final dev metrics: written last, the finished marker
            failure_check.json  whether the run failed: its dev main metric at or below
                              the dev set's constant-prediction baseline + --failure_margin
            model.weights.h5  encoder + head;  encoder/  the fine-tuned encoder alone (its
                              config and vocabulary; its weights: model.weights.h5's backbone/)
            checkpoints/      resume state, dropped when the run finishes (--keep_checkpoints)
            tensorboard/      event files
            trajectory/       weights along training (--save_trajectory_every)
            export.json       where the run's SavedModel went (--export_dir)
            report.md, curves.png, failed.json (a sweep's diverged run), sweep_pruned.json
            stop_point.json   where --stop_early_at stopped the run: step, total steps,
                              seconds so far and the dev metrics there
            .kerasbert.lock   while a process uses the folder (see `lock`)
    <sweep>/ runs/<lr…-r…>/ (one run folder each), sweep.json, sweep.csv, sweep.png, report.md

Nothing else in kerasbert spells these names: a module that reads or writes a run's
files asks this one. A folder may be local or on any filesystem TensorFlow has
(`--output_dir=gs://bucket/runs/x`; kerasbert/storage.py).
"""

import dataclasses
import fcntl
import json
import os
import shlex
import socket
import sys

from kerasbert import storage
from kerasbert.config import SEED_PARTS, RunConfig
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
GRAD_NORMS = "grad_norms.csv"
FAILURE_CHECK = "failure_check.json"  # the failed-run check (not failed.json: a crash)
MODEL_WEIGHTS = "model.weights.h5"
EXPORT_RECORD = "export.json"
REPORT = "report.md"
CURVES = "curves.png"
FAILED = "failed.json"
STOP_POINT = "stop_point.json"  # where --stop_early_at stopped the run, and its dev metrics
PRUNED = "sweep_pruned.json"  # written by a sweep when it dropped a run's large files
LOCK = ".kerasbert.lock"  # flock-ed by the process using the folder; names its pid (`lock`)
ENCODER_DIR = "encoder"
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
TRAJECTORY_DIR = "trajectory"
# Inside checkpoints/: what a resumed run needs besides the TF checkpoint itself.
BEST_HEAD = "best_head.npz"  # the frozen phase's best head (--frozen_patience)
PHASE_METRICS = "phases.json"  # dev metrics at the end of each finished phase

# The small files that say what a run did (a sweep keeps them when it prunes a run).
SUMMARY_FILES = (RUN_CONFIG, METRICS, EVAL_RESULTS, HISTORY, GRAD_NORMS, FAILURE_CHECK, REPORT,
                 CURVES, PRUNED, FAILED, STOP_POINT)
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
    if storage.isfile(path(run_dir, METRICS)):
        return "finished"
    if storage.isfile(path(run_dir, FAILED)):
        return "failed"
    if storage.isfile(path(run_dir, RUN_CONFIG)):
        return "unfinished"
    return "pending"


def is_finished(run_dir):
    return storage.isfile(path(run_dir, METRICS))


# --- Readers and writers -----------------------------------------------------------------

def read_config(run_dir):
    """run_config.json as a dict ({} when the folder has none)."""
    file = path(run_dir, RUN_CONFIG)
    return read_json_object(file) if storage.isfile(file) else {}


def read_run_config(run_dir):
    """run_config.json as a RunConfig. Paths of the training data are not needed to export
    (the vocabulary comes from the run's encoder/), so their absence is no error."""
    path = os.path.join(run_dir, RUN_CONFIG)
    if not storage.isfile(path):
        raise InputError(f"{at(path)}missing: --run_dir must be a finished kerasbert run")
    values = read_json_object(path)
    known = {f.name for f in dataclasses.fields(RunConfig)}
    values = {k: v for k, v in values.items() if k in known}  # a newer run's extra settings
    values.update(data_dir=None, tfds_data_dir=None, vocab_file=None, train_file=None,
                  predict_file=None, validation_file=None, test_file=None)
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
    return read_json_object(file) if storage.isfile(file) else {}


def write_metrics(run_dir, metrics, per_phase=None):
    """The finished marker: final dev metrics, plus each phase's when there were several."""
    atomic_write_json(path(run_dir, METRICS),
                      {**metrics, "phases": per_phase} if per_phase and len(per_phase) > 1
                      else metrics)


def write_failure_check(run_dir, record):
    """failure_check.json: {"failed", "metric", "value", "baseline", "margin",
    "greater_is_better"} (kerasbert.metrics.failure_check), written just before
    metrics.json."""
    atomic_write_json(path(run_dir, FAILURE_CHECK), record)


def read_failure_check(run_dir):
    """The run's failed-run check ("failed": true, false, or None when its baseline is
    unknown), or None for a run without one (made before the check, or unfinished)."""
    file = path(run_dir, FAILURE_CHECK)
    return read_json_object(file) if storage.isfile(file) else None


def read_eval_results(run_dir):
    """eval_results.txt as {name: float} ({} when absent). It exists before metrics.json
    (a run exports in between, so that a kill during export resumes to it)."""
    file = path(run_dir, EVAL_RESULTS)
    results = {}
    if storage.isfile(file):
        with storage.open_file(file) as f:
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


def tagging_predictions_file(split):
    """A tagging run's conlleval-format predictions of a split (`word gold predicted`)."""
    return f"{split}_predictions.txt"


def read_tagging_predictions(run_dir, split):
    """The (gold tags, predicted tags) of each sentence of a tagging run's
    `<split>_predictions.txt`, or None when the run has no such file (or it holds no gold
    tags: an unlabelled split)."""
    file = path(run_dir, tagging_predictions_file(split))
    if not storage.isfile(file):
        return None
    sentences, gold, predicted = [], [], []
    with storage.open_file(file) as f:
        for line in f:
            fields = line.rstrip("\n").split(" ")
            if fields == [""]:
                if gold:
                    sentences.append((gold, predicted))
                gold, predicted = [], []
                continue
            if len(fields) < 3:
                return None
            gold.append(fields[-2])
            predicted.append(fields[-1])
    if gold:
        sentences.append((gold, predicted))
    return sentences


def read_run_history(run_dir):
    """history.csv as a list of dict rows (strings), [] when absent."""
    return read_history(path(run_dir, HISTORY))


def write_run_history(run_dir, rows):
    write_history(path(run_dir, HISTORY), rows)


def read_grad_norms(run_dir):
    """grad_norms.csv as a list of dict rows (strings), [] when absent."""
    return read_history(path(run_dir, GRAD_NORMS))


def write_grad_norms(run_dir, rows):
    write_history(path(run_dir, GRAD_NORMS), rows)


def read_failure(run_dir):
    return read_json_object(path(run_dir, FAILED)).get("error", "?")


def write_failure(run_dir, error):
    atomic_write_json(path(run_dir, FAILED), {"error": str(error)})


def read_stop_point(run_dir):
    """stop_point.json as a dict, or None: {"fraction", "step", "total_steps", "seconds",
    "metrics", "finished"} (finished: the stop fell on the run's last step)."""
    file = path(run_dir, STOP_POINT)
    return read_json_object(file) if storage.isfile(file) else None


def write_stop_point(run_dir, record):
    atomic_write_json(path(run_dir, STOP_POINT), record)


def read_export_record(run_dir):
    """The SavedModel folder a run exported to, or None."""
    file = path(run_dir, EXPORT_RECORD)
    return read_json_object(file).get("path") if storage.isfile(file) else None


def write_export_record(run_dir, export_path):
    atomic_write_json(path(run_dir, EXPORT_RECORD), {"path": export_path})


def read_pruned(run_dir):
    file = path(run_dir, PRUNED)
    return read_json_object(file).get("removed", []) if storage.isfile(file) else []


def write_pruned(run_dir, removed):
    atomic_write_json(path(run_dir, PRUNED), {"removed": sorted(removed)})


# --- Preparing a folder for a run --------------------------------------------------------

def changed_settings(run_dir, config, may_change):
    """(name, saved, now) of each setting, in the config's order, that the run in
    `run_dir` was started with and `config` now gives differently, leaving out the names
    in `may_change`. A setting newer than the run's run_config.json counts as its default
    there (the run was made before the setting existed, i.e. with its default)."""
    saved = read_config(run_dir)
    if not saved:  # no run there yet
        return []
    defaults = {f.name: f.default for f in dataclasses.fields(config)
                if f.default is not dataclasses.MISSING}
    saved = {**json.loads(json.dumps({k: v for k, v in defaults.items() if k not in saved})),
             **saved}
    now = json.loads(json.dumps(config.to_dict()))
    for values in (saved, now):  # a part's seed left out (None) is --seed's: the same run
        for part in SEED_PARTS:
            if values.get(f"{part}_seed") is None:
                values[f"{part}_seed"] = values.get("seed")
    return [(k, saved[k], v) for k, v in now.items()
            if k not in may_change and k in saved and saved[k] != v]


# Differences in these settings do not stop an unfinished run from resuming.
RESUMABLE_CHANGES = ("overwrite_output_dir", "do_predict", "export_dir", "eval_batch_size",
                     "save_checkpoints_steps", "keep_checkpoints", "stop_early_at")


def check(config):
    """The refusals of `prepare`, touching nothing: (finished, is_run) of --output_dir.
    A run calls it as soon as it holds the folder's lock, before the encoder loads."""
    out = config.output_dir
    finished = is_finished(out)
    is_run = storage.exists(path(out, RUN_CONFIG))
    foreign = storage.isdir(out) and bool(_contents(out)) and not is_run and not finished
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
    return finished, is_run


def prepare(config):
    """Makes --output_dir ready: a new or empty folder is used; an unfinished run with the
    same settings resumes; a finished run, one with other settings, or a folder of other
    files needs --overwrite_output_dir (which removes a kerasbert run's files, never
    anyone else's)."""
    out = config.output_dir
    finished, is_run = check(config)
    try:
        storage.makedirs(out)
        probe = path(out, ".write_test")
        with storage.open_file(probe, "w") as f:
            f.write("")
        storage.remove(probe)
    except Exception as e:
        if not storage.is_io_error(e):
            raise
        raise InputError(f"--output_dir={out}: cannot write there ({storage.reason(e)})") from None
    if config.overwrite_output_dir and (finished or is_run):
        # Start over: the old run's results and checkpoints must not mix with the new.
        clear(out, _contents(out))


def _contents(folder):
    """The names in `folder` but the lock of the process using it."""
    return [name for name in storage.listdir(folder) if name != LOCK]


def clear(folder, names):
    """Removes the named files and folders of `folder` (those that exist)."""
    for name in names:
        target = path(folder, name)
        if storage.isdir(target):
            storage.rmtree(target)
        elif storage.exists(target):
            storage.remove(target)


def drop_resume_state(run_dir):
    """Removes a finished run's checkpoints/ (weights and every optimizer's state: most of
    the folder's size); what a user needs stays (--keep_checkpoints keeps them). Called
    after metrics.json exists, so a kill meanwhile never leaves an unfinished run without
    its resume state."""
    clear(run_dir, [CHECKPOINT_DIR])


# --- Who is using a folder ---------------------------------------------------------------

class FolderLock:
    """A folder taken by this process (see `lock`); `release()` or a `with` block gives it
    back. The kernel gives it back too when the process ends, however it ends."""

    def __init__(self, folder, fd, created):
        self.folder, self._fd, self._created = folder, fd, created

    def release(self):
        if self._fd is None:
            return
        try:  # removed while still held: a process that opened it meanwhile takes it anew
            os.remove(path(self.folder, LOCK))
        except OSError:
            pass
        for folder in self._created:  # deepest first; only what nothing else went into
            try:
                os.rmdir(folder)
            except OSError:
                break
        os.close(self._fd)
        self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def lock(folder, flag="--output_dir", optional=False):
    """Takes `folder` for this process, or refuses: an exclusive `flock` on
    <folder>/.kerasbert.lock, held until release (or until the process ends: the kernel
    drops it on any exit, SIGKILL included, so a killed run never blocks its own resume).
    The file says who holds it (pid, host, command); another process holding it is an
    InputError naming the folder and that process, before anything is written.

    A folder that does not exist is created (it cannot be written: an InputError), and
    removed again on release if only the lock went into it, so a run refused for bad input
    leaves nothing behind. `optional`: a folder the process only reads and cannot write to
    is used without a lock.

    On a filesystem with a scheme (gs://, ram://) there is no flock: see `_lock_remote`."""
    if not storage.is_local(folder):
        return _lock_remote(folder, flag, optional)
    folder = storage.local(folder)
    created, why = [], None
    for _ in range(100):  # only a holder removing the file or folder meanwhile repeats it
        created = _missing_folders(folder) or created
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:  # /proc/x: ENOENT for ever; a vanishing parent: once
            why = f"cannot create it ({e.strerror})"
            if isinstance(e, FileNotFoundError):
                continue
            _remove_empty(created)
            if optional and os.path.isdir(folder):
                return FolderLock(folder, None, [])
            raise InputError(f"{flag}={folder}: {why}") from None
        try:
            fd = os.open(path(folder, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError as e:
            why = f"cannot take its lock {LOCK} ({e.strerror})"
            continue
        except OSError as e:
            _remove_empty(created)
            if optional and os.path.isdir(folder):
                return FolderLock(folder, None, [])
            raise InputError(f"{flag}={folder}: cannot write there ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise InputError(f"{flag}={folder}: in use by {holder}; wait for it to end, or "
                             "stop it") from None
        try:  # still the file in place (its holder may have removed it as we opened it)?
            current = os.stat(path(folder, LOCK))
        except FileNotFoundError:
            current = None
        if current is not None and os.path.samestat(current, os.fstat(fd)):
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(_holder()).encode() + b"\n")
            return FolderLock(folder, fd, created)
        os.close(fd)
        why = f"cannot take its lock {LOCK} (it was removed each time it was taken)"
    _remove_empty(created)
    raise InputError(f"{flag}={folder}: {why}")


class RemoteFolderLock:
    """A folder on an object store marked as used by this process (see `_lock_remote`)."""

    def __init__(self, folder, created):
        self.folder, self._created, self._held = folder, created, True

    def release(self):
        if not self._held:
            return
        self._held = False
        lock_file = path(self.folder, LOCK)
        try:
            if _read_remote_holder(lock_file).get("pid") == os.getpid():
                storage.remove(lock_file)
            if self._created and not storage.listdir(self.folder):
                storage.rmtree(self.folder)  # made for a run that was refused: nothing in it
        except Exception as e:
            if not storage.is_io_error(e):
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _lock_remote(folder, flag, optional):
    """An object store (gs://) has no flock, and a lock file whose writer was killed would
    stay for ever: there the lock is advisory. .kerasbert.lock names the process using the
    folder; a second run refuses only when that process is alive on this same machine. Two
    runs on two machines are not stopped: give each its own --output_dir."""
    storage.check_scheme(folder, flag)
    created = not storage.exists(folder)
    try:
        storage.makedirs(folder)
        holder = _read_remote_holder(path(folder, LOCK))
        if _alive_here(holder):
            raise InputError(f"{flag}={folder}: in use by process {holder['pid']} "
                             f"({holder.get('command', '')}); wait for it to end, or stop it")
        atomic_write_json(path(folder, LOCK), _holder())
    except InputError:
        raise
    except Exception as e:
        if not storage.is_io_error(e):
            raise
        if optional and storage.isdir(folder):
            return RemoteFolderLock(folder, False)
        raise InputError(f"{flag}={folder}: cannot write there ({storage.reason(e)})") from None
    return RemoteFolderLock(folder, created)


def _read_remote_holder(lock_file):
    if not storage.exists(lock_file):
        return {}
    try:
        with storage.open_file(lock_file) as f:
            holder = json.loads(f.read())
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _alive_here(holder):
    """The holder is another process, running on this machine."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or holder.get("host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _holder():
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv:
        argv[0] = os.path.basename(argv[0])
    command = " ".join(shlex.join(argv).split())  # one line, whatever `python -c` ran
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command}


def _describe_holder(fd):
    """'process 1234 (python -m kerasbert.main --task=...)', from the lock file."""
    try:
        holder = json.loads(os.pread(fd, 65536, 0).decode("utf-8"))
        pid, host, command = holder["pid"], holder.get("host"), holder.get("command", "")
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"  # it took the lock a moment ago and is writing its name
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"process {pid}{where}" + (f" ({command})" if command else "")


def _missing_folders(folder):
    """`folder` and those of its parents that do not exist, deepest first."""
    missing = []
    folder = os.path.abspath(folder)
    while not os.path.lexists(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return missing


def _remove_empty(folders):
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            break
