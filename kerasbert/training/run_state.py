"""Run state for resuming (model, optimizers, position in the run) and atomic weight files."""

import dataclasses
import glob
import io
import math
import os
import re
import time

import numpy as np
import tensorflow as tf

from kerasbert import faults, storage
from kerasbert.errors import InputError, TrainingError, at
from kerasbert.io_utils import replaced_whole
from kerasbert.run_folder import CHECKPOINT_DIR

# Two complete checkpoints: a newest one torn by a kill (or a full disk) falls back to the
# one before it.
MAX_TO_KEEP = 2


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a run stands: `phase` index, `epoch`s finished in it, `step`s done in the next
    epoch, that partial epoch's running sums, and the early-stopping state of the phase."""

    phase: int = 0
    epoch: int = 0
    step: int = 0
    loss_sum: float = 0.0
    correct: float = 0.0
    seen: float = 0.0
    best: float | None = None
    since_best: int = 0
    grad_norm_sum: tuple = ()  # that partial epoch's summed gradient norms per group


class NonFiniteWeightsError(TrainingError):
    """A weight became NaN or infinite; it is never written over the last good checkpoint."""


class RunState:
    """The latest complete state of a run in `<output_dir>/checkpoints`: weights, every
    phase's optimizer, dropout seed states and the run's Position.

    tf.train.CheckpointManager writes the checkpoint files first and the index last, so
    a run killed while saving still restores the previous complete checkpoint; one whose
    files were torn anyway (a full disk, a crashed file system) fails to restore (the
    index holds a checksum of every tensor) and the previous one is used instead.
    """

    def __init__(self, output_dir, model, optimizers, loss_scales=None, grad_norm_size=0):
        self.directory = os.path.join(output_dir, CHECKPOINT_DIR)
        self.model = model
        self.optimizers = list(optimizers.values())
        self.restored_from = None
        self.last_good = None  # the newest checkpoint known to be whole
        def variable(value, dtype):
            return tf.Variable(value, dtype=dtype, trainable=False)

        self.variables = {
            "phase": variable(0, tf.int64), "epoch": variable(0, tf.int64),
            "step": variable(0, tf.int64), "loss_sum": variable(0.0, tf.float64),
            "correct": variable(0.0, tf.float64), "seen": variable(0.0, tf.float64),
            "best": variable(math.nan, tf.float64), "since_best": variable(0, tf.int64)}
        self.grad_norm_size = grad_norm_size
        if grad_norm_size:  # --grad_norm_every: per group
            self.variables["grad_norm_sum"] = variable(np.zeros(grad_norm_size), tf.float64)
        # tf.train.Checkpoint does not follow Keras 3 layers to their dropout seed-generator
        # states; saving them too makes a resumed run draw the same dropout masks.
        non_trainable = [v.value for v in model.non_trainable_variables]
        def checkpoint(variables):
            return tf.train.Checkpoint(
                model=model, non_trainable=non_trainable, **variables,
                **{f"optimizer_{name}": optimizer for name, optimizer in optimizers.items()},
                # mixed_float16: each phase's dynamic loss scale (precision.DynamicLossScale)
                **{f"loss_scale_{name}": scale for name, scale in (loss_scales or {}).items()})

        self.checkpoint = checkpoint(self.variables)
        # A checkpoint written before gradient norms were recorded (or with them off)
        # restores through this one: its partial epoch's norm sums start from zero.
        self._without_norms = checkpoint({k: v for k, v in self.variables.items()
                                          if k != "grad_norm_sum"})
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory,
                                                  max_to_keep=MAX_TO_KEEP)

    # Kept for callers of the epoch-granular API: `epoch` is the number of finished epochs.
    @property
    def phase(self):
        return self.variables["phase"]

    @property
    def epoch(self):
        return self.variables["epoch"]

    def candidates(self):
        """Checkpoint prefixes on disk, newest first (found from the files themselves, so a
        lost or stale `checkpoint` index file does not hide any)."""
        numbered = []
        for index in storage.glob(os.path.join(self.directory, "ckpt-*.index")):
            match = re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(index))
            if match:
                numbered.append((int(match.group(1)), index[: -len(".index")]))
        return [prefix for _, prefix in sorted(numbered, reverse=True)]

    def restore(self, log=print):
        """Restores the newest checkpoint that reads back whole; returns its Position
        (Position() when there is none)."""
        for prefix in self.candidates():
            try:
                saved = {name.split("/")[0] for name, _ in tf.train.list_variables(prefix)}
                whole = "grad_norm_sum" in saved or "grad_norm_sum" not in self.variables
                if not whole:
                    self.variables["grad_norm_sum"].assign(np.zeros(self.grad_norm_size))
                (self.checkpoint if whole else self._without_norms).restore(
                    prefix).assert_existing_objects_matched()
            except (tf.errors.OpError, IndexError, OSError) as e:  # missing, torn, bad checksum
                reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                log(f"kerasbert: checkpoint {prefix} is damaged ({reason}); trying the one before")
                continue
            except (AssertionError, ValueError) as e:  # whole, but of another model
                raise InputError(f"{at(prefix)}does not match this run's model ("
                                 f"{(str(e).strip().splitlines() or ['?'])[0][:200]}); pass "
                                 "--overwrite_output_dir to start over") from None
            self.restored_from = self.last_good = prefix
            return self.position()
        return Position()

    def position(self):
        v = {name: var.numpy() for name, var in self.variables.items()}
        return Position(phase=int(v["phase"]), epoch=int(v["epoch"]), step=int(v["step"]),
                        loss_sum=float(v["loss_sum"]), correct=float(v["correct"]),
                        seen=float(v["seen"]),
                        best=None if math.isnan(v["best"]) else float(v["best"]),
                        since_best=int(v["since_best"]),
                        grad_norm_sum=tuple(float(x) for x in v.get("grad_norm_sum", ())))

    def save(self, phase, finished_epochs, position=None):
        """Saves the run at `phase`, after `finished_epochs` (and `position.step` steps of
        the next epoch); refuses non-finite weights, so the last good checkpoint stays."""
        position = dataclasses.replace(position or Position(), phase=phase,
                                       epoch=finished_epochs)
        check_finite(self.model, sum(int(o.iterations.numpy()) for o in self.optimizers))
        for name, var in self.variables.items():
            value = getattr(position, name)
            if name == "grad_norm_sum":
                value = value or np.zeros(self.grad_norm_size)
            var.assign(math.nan if value is None else value)
        try:
            self.last_good = self.manager.save()
        except (tf.errors.OpError, OSError) as e:  # a full disk, a vanished folder
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise InputError(f"{at(self.directory)}cannot write a checkpoint ({reason}); the "
                             f"last good one ({self.last_good or 'none yet'}) is kept") from None
        faults.crash_point("checkpoint")
        faults.crash_point("checkpoint_torn", before_kill=lambda: tear(self.manager.latest_checkpoint))


def check_finite(model, step):
    bad = [v.path for v in model.trainable_variables
           if not bool(tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(v))))]
    if bad:
        raise NonFiniteWeightsError(
            f"{len(bad)} weight(s) became NaN or infinite by step {step} (first: {bad[0]}); "
            "not saving them")


def tear(prefix):
    """Truncates a checkpoint's data to half, as a crash mid-write can leave it (tests)."""
    for path in glob.glob(prefix + ".data-*"):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)


def trim_event_files(directory, last_step):
    """Drops TensorBoard events logged after `last_step` (by a run that was then killed
    and resumes from a checkpoint at `last_step`), so the curves have no repeated steps.

    The kept events go into one new file (renamed into place when complete) before the
    old files are removed; a repeated (step, tags) is kept once, so a kill in between
    leaves nothing doubled after the next resume either.
    """
    paths = sorted(storage.glob(os.path.join(directory, "*tfevents*")))
    if not paths:
        return
    kept, seen = [], set()
    for path in paths:
        try:
            for record in tf.data.TFRecordDataset(path):
                event = tf.compat.v1.Event.FromString(record.numpy())
                key = (event.step, tuple(v.tag for v in event.summary.value), event.file_version)
                if event.step <= last_step and key not in seen:
                    seen.add(key)
                    kept.append(record.numpy())
        except tf.errors.DataLossError:  # a record torn by the kill: the rest is lost anyway
            pass
    target = os.path.join(directory, f"events.out.tfevents.{time.time():.6f}.resumed.v2")
    with replaced_whole(target, stem="trim") as tmp:  # not a tfevents name until complete
        with tf.io.TFRecordWriter(tmp) as writer:
            for record in kept:
                writer.write(record)
    for path in paths:
        storage.remove(path)


def save_weights_atomically(model, path):
    try:
        with replaced_whole(path, suffix=".weights.h5") as tmp:
            model.save_weights(tmp, overwrite=True)  # Keras writes gs:// etc. via tf.io.gfile
    except Exception as e:
        if not storage.is_io_error(e):
            raise
        raise InputError(f"{at(path)}cannot write: {storage.reason(e)}") from None


def save_layer_weights(layer, path):
    """A layer's weights (in `layer.weights` order) as an .npz, written whole or not at all."""
    with replaced_whole(path, suffix=".npz") as tmp, storage.open_file(tmp, "wb") as f:
        np.savez(f, *[w.numpy() for w in layer.weights])


def load_layer_weights(layer, path):
    with storage.open_file(path, "rb") as f:
        data = io.BytesIO(f.read())  # np.load needs a seekable file; gfile's is not always
    with np.load(data) as saved:
        for i, weight in enumerate(layer.weights):
            weight.assign(saved[f"arr_{i}"])
