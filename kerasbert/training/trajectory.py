"""Weights along fine-tuning: θ0 (pre-trained encoder + the new head's initialisation,
before the first step), every N steps, and θ1 (the end), as float32 .npz files.

    <output_dir>/trajectory/trajectory.json   names and shapes of the weights, the
                                              checkpoints written, and the final step
    <output_dir>/trajectory/step_0000040.npz  arr_i = the i-th weight of `names`

Capturing copies the variables to numpy (fast, in the training thread, so the copy is
consistent) and writes the file from a background thread, so training does not wait for
the disk. Files and the manifest are written atomically: a killed run leaves only
complete checkpoints listed, and a resumed run keeps its θ0.
"""

import concurrent.futures
import os

import numpy as np

from kerasbert import storage
from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_json, read_json_object, replaced_whole
from kerasbert.run_folder import TRAJECTORY_DIR

MANIFEST = "trajectory.json"


def model_weights(model):
    """The model's floating-point weights (every trainable and frozen parameter), in a
    fixed order; `weight.path` names them uniquely."""
    return [w for w in model.weights if "float" in str(w.dtype)]


def weight_names(model):
    return [w.path for w in model_weights(model)]


def snapshot(model):
    """The model's weights as float32 numpy copies, in `model_weights` order."""
    return [np.array(w.numpy(), dtype=np.float32, copy=True) for w in model_weights(model)]


def assign(model, arrays):
    for weight, value in zip(model_weights(model), arrays, strict=True):
        weight.assign(value)


def _write_npz(path, arrays):
    with replaced_whole(path, suffix=".npz") as tmp, storage.open_file(tmp, "wb") as f:
        np.savez(f, *arrays)


class TrajectoryRecorder:
    """Saves the model's weights at step 0, every `every` steps and at the end."""

    def __init__(self, model, output_dir, every):
        if every <= 0:
            raise ValueError("every must be positive")
        self.model, self.every = model, every
        self.directory = os.path.join(output_dir, TRAJECTORY_DIR)
        storage.makedirs(self.directory)
        names = weight_names(model)
        shapes = [list(w.shape) for w in model_weights(model)]
        path = os.path.join(self.directory, MANIFEST)
        self.manifest = read_json_object(path) if storage.exists(path) else {}
        if self.manifest.get("shapes") != shapes:  # a fresh run (or another model): start over
            self.manifest = {"names": names, "shapes": shapes, "every": every,
                             "checkpoints": [], "final_step": None}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._pending = None
        self._last_step = None

    def start(self):
        """θ0: called before the first training step (a resumed run keeps its own)."""
        if not any(c["step"] == 0 for c in self.manifest["checkpoints"]):
            self.capture(0)

    def on_step(self, step):
        self._last_step = step
        if step % self.every == 0:
            self.capture(step)

    def finish(self):
        """θ1: the weights at the end of training; waits for every write."""
        steps = [c["step"] for c in self.manifest["checkpoints"]]
        final = self._last_step if self._last_step is not None else max(steps, default=0)
        if final not in steps:
            self.capture(final)
        self._wait()
        self.manifest["final_step"] = final
        self._write_manifest()
        self._pool.shutdown()

    def capture(self, step):
        arrays = snapshot(self.model)  # consistent copy, taken before the next step runs
        self._wait()  # one write in flight: memory stays at one extra copy of the model
        self._pending = self._pool.submit(self._write, step, arrays)

    def _write(self, step, arrays):
        name = f"step_{step:07d}.npz"
        _write_npz(os.path.join(self.directory, name), arrays)
        kept = [c for c in self.manifest["checkpoints"] if c["step"] != step]
        self.manifest["checkpoints"] = sorted(kept + [{"step": step, "file": name}],
                                              key=lambda c: c["step"])
        self._write_manifest()

    def _write_manifest(self):
        atomic_write_json(os.path.join(self.directory, MANIFEST), self.manifest)

    def _wait(self):
        if self._pending is not None:
            self._pending.result()  # re-raises a failed write here, in the training thread
            self._pending = None


def recorder_for(config, model):
    """The recorder a run asked for with --save_trajectory_every, or None."""
    every = getattr(config, "save_trajectory_every", 0) or 0
    return TrajectoryRecorder(model, config.output_dir, every) if every > 0 else None


class Trajectory:
    """A finished run's saved checkpoints; weights are read from disk on demand."""

    def __init__(self, run_dir):
        self.directory = os.path.join(run_dir, TRAJECTORY_DIR)
        path = os.path.join(self.directory, MANIFEST)
        if not os.path.isfile(path):
            raise InputError(f"{at(path)}missing: train the run with "
                             "--save_trajectory_every=N to record its trajectory")
        manifest = read_json_object(path)
        try:
            self.names = list(manifest["names"])
            self.shapes = [tuple(s) for s in manifest["shapes"]]
            self.steps = [int(c["step"]) for c in manifest["checkpoints"]]
            self.files = [c["file"] for c in manifest["checkpoints"]]
            self.final_step = manifest["final_step"]
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{at(path)}not a trajectory manifest ({e})") from None
        if self.final_step is None:
            raise InputError(f"{at(path)}the run did not finish training (no final step)")
        if not self.steps or self.steps[0] != 0:
            raise InputError(f"{at(path)}no step-0 checkpoint (θ0)")

    def check_model(self, model):
        """The checkpoints must hold the model's weights, by count and shape (names are not
        compared: Keras numbers the head's path per process, e.g. task_model_1/...)."""
        shapes = [tuple(w.shape) for w in model_weights(model)]
        if shapes != self.shapes:
            raise InputError(f"{at(os.path.join(self.directory, MANIFEST))}its weights do not "
                             "match the run's model")

    def load(self, step):
        file = self.files[self.steps.index(step)]
        path = os.path.join(self.directory, file)
        try:
            with np.load(path) as saved:
                arrays = [saved[f"arr_{i}"] for i in range(len(self.names))]
        except (OSError, KeyError, ValueError) as e:
            raise InputError(f"{at(path)}cannot read the checkpoint: {e}") from None
        for array, shape in zip(arrays, self.shapes):
            if tuple(array.shape) != shape:
                raise InputError(f"{at(path)}a weight has shape {array.shape}, expected {shape}")
        return arrays

    def start(self):
        return self.load(0)

    def final(self):
        return self.load(self.final_step)
