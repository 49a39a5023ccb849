"""Training phases: frozen encoder first (stack-and-finetune's phase 1), then everything.

    --frozen_epochs=N --frozen_learning_rate=LR --frozen_patience=P   phase 1 ("frozen")
    --num_train_epochs=M --learning_rate=LR [--head_learning_rate=LR] phase 2 ("finetune")

fine-tune only: N = 0; frozen only (feature-based): M = 0; stack-and-finetune: both.
Each phase has its own AdamW state and warmup/decay schedule. In the frozen phase the
encoder also runs without dropout (inference mode): its outputs are then fixed features,
exactly what a cached-feature run would see, and its weights stay bit-identical.
"""

import dataclasses
import math
import os
import time

import numpy as np
import tensorflow as tf

from kerasbert import faults, run_folder, storage
from kerasbert.data import pipeline
from kerasbert.errors import TrainingError
from kerasbert.io_utils import atomic_write_json, read_json_object
from kerasbert.metrics import greater_is_better, improves
from kerasbert.plugins import resolve_kind
from kerasbert.training import memory, run_state, optimization, precision
from kerasbert.training.loop import (
    TOTAL_GROUP,
    Timer,
    Trainer,
    count_steps,
    gradient_groups,
    trainer_options,
)
from kerasbert.training.progress import Progress
from kerasbert.training.trajectory import recorder_for


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str  # "frozen" or "finetune"
    num_epochs: float
    learning_rate: float
    train_backbone: bool
    patience: int | None = None  # early stopping on the dev main metric (frozen phase)
    head_learning_rate: float | None = None  # the head's own peak rate (fine-tune phase)


def plan_phases(config):
    phases = []
    if config.frozen_epochs > 0:
        phases.append(Phase("frozen", config.frozen_epochs, config.frozen_learning_rate,
                            train_backbone=False, patience=config.frozen_patience))
    if config.num_train_epochs > 0:
        phases.append(Phase("finetune", config.num_train_epochs, config.learning_rate,
                            train_backbone=True, head_learning_rate=config.head_learning_rate))
    return phases


def head_variables(model):
    """The trainable variables outside the encoder: the head's."""
    encoder = {v.path for v in model.backbone.weights}
    return [v for v in model.trainable_variables if v.path not in encoder]


def stop_step(fraction, total_steps):
    """The global step --stop_early_at=`fraction` stops after: the nearest whole step, at
    least 1; None (no stop) without a fraction or when that is the run's last step."""
    if fraction is None:
        return None
    step = max(1, round(fraction * total_steps))
    return step if step < total_steps else None


class StopPoint(Exception):
    """Raised right after the checkpoint of the --stop_early_at step is written (as a kill
    there would leave the run): `metrics` are the dev metrics there, when an epoch ended."""

    def __init__(self, metrics):
        super().__init__("stopped early")
        self.metrics = metrics


class PhaseRunner:
    """Runs the planned phases epoch by epoch: train, evaluate, log, checkpoint, resume."""

    def __init__(self, model, strategy, task, config, train, dev_metrics, log, kind=None):
        self.model, self.strategy, self.task, self.config = model, strategy, task, config
        self.kind = kind or resolve_kind(task.kind)  # the run's registry's, when it gives one
        # dev_metrics(trainer) -> the dev metrics of the model as it is now
        self.train, self.dev_metrics, self.log = train, dev_metrics, log
        self.phases = plan_phases(config)
        # An epoch is one pass over the feature rows: a long SQuAD context or CoNLL sentence
        # gives several rows, and counting examples would leave the last batches untrained.
        self.rows = pipeline.num_rows(train)
        self.steps = [count_steps(self.rows, config.train_batch_size, p.num_epochs)
                      for p in self.phases]
        self.trained_parameters = {}  # phase -> parameters its optimizer updates
        with strategy.scope():
            self.optimizers = {}
            for phase, (_, total) in zip(self.phases, self.steps):
                model.set_backbone_trainable(phase.train_backbone)
                self.trained_parameters[phase.name] = sum(
                    math.prod(v.shape) for v in model.trainable_variables)
                optimizer = optimization.create_optimizer(
                    model.trainable_variables, phase.learning_rate, total,
                    warmup_steps=int(total * config.warmup_proportion),
                    weight_decay=config.weight_decay, head_variables=head_variables(model),
                    head_learning_rate=phase.head_learning_rate,
                    bias_correction=config.adam_bias_correction)
                optimizer.build(model.trainable_variables)
                self.optimizers[phase.name] = optimizer
            # mixed_float16: one loss scale per phase, as each phase's Trainer would make,
            # but made here so that the run's checkpoints hold it.
            self.loss_scales = ({phase.name: precision.DynamicLossScale() for phase in self.phases}
                                if model.dtype_policy.compute_dtype == "float16" else {})
        # --grad_norm_every: the groups the gradient norms are measured over (every phase's
        # the same columns; a frozen phase's encoder groups are 0: no gradient reaches them).
        self.grad_groups = ([*gradient_groups(model)[0], TOTAL_GROUP] if config.grad_norm_every
                            else [])
        self.grad_rows = []  # grad_norms.csv
        # An epoch's running sums per group, then how many steps they sum (checkpointed).
        sums = len(self.grad_groups) + 1 if self.grad_groups else 0
        self.state = run_state.RunState(config.output_dir, model, self.optimizers,
                                            self.loss_scales, grad_norm_size=sums)
        self.best_head_path = os.path.join(self.state.directory, run_folder.BEST_HEAD)
        self.phase_metrics_path = os.path.join(self.state.directory, run_folder.PHASE_METRICS)
        self.tensorboard_dir = run_folder.path(config.output_dir, run_folder.TENSORBOARD_DIR)
        self.writer = None  # made after a resume has trimmed the event files
        self.timer = Timer()
        self.trajectory = recorder_for(config, model)  # --save_trajectory_every (else None)
        # --stop_early_at: the global step to stop after (None: run to the end). The
        # schedules above are the full run's, so a continued run is the full run.
        self.total_steps = sum(total for _, total in self.steps)
        self.stop_step = stop_step(config.stop_early_at, self.total_steps)
        self.stopped = None  # {"step", "metrics"} once the run stopped there

    def run(self):
        """Trains every phase; returns ({phase: dev metrics at its end}, last dev metrics).

        A run killed at any point and started again continues from its last complete
        checkpoint: same phase, step, optimizer and schedule state, data order and dropout
        state, so it ends with the metrics an uninterrupted run would have.
        """
        position = self.state.restore(self.log)
        resumed = self.state.restored_from is not None
        history, per_phase = [], {}
        if resumed:
            where = (f"after epoch {position.epoch}" + (f", step {position.step} into the next"
                                                        if position.step else ""))
            if position.phase >= len(self.phases):
                where = "training complete; finishing evaluation and outputs"
            self.log(f"kerasbert: resuming at phase {min(position.phase + 1, len(self.phases))}, "
                     f"{where}, from {self.state.restored_from}")
            history = self._history_until(position)
            run_folder.write_run_history(self.config.output_dir, history)
            run_state.trim_event_files(self.tensorboard_dir, self._global_step(position.phase))
            self.grad_rows = [row for row in run_folder.read_grad_norms(self.config.output_dir)
                              if int(row["step"]) <= self._global_step(position.phase)]
            if self.grad_groups:
                run_folder.write_grad_norms(self.config.output_dir, self.grad_rows)
            if storage.exists(self.phase_metrics_path):
                per_phase = read_json_object(self.phase_metrics_path)
        self.writer = tf.summary.create_file_writer(self.tensorboard_dir)
        metrics = per_phase.get(self.phases[-1].name, {}) if per_phase else {}
        if self.trajectory is not None:
            self.trajectory.start()  # θ0, before the first step (kept across a resume)
        for index in range(position.phase, len(self.phases)):
            phase = self.phases[index]
            if self.stop_step is not None and self._global_step(index) >= self.stop_step:
                # Started again with the same stop (or past it: an early-stopped phase
                # skipped its last steps): stop here, with the checkpoint as it is.
                self.stopped = {"step": self._global_step(index), "metrics": None}
                return per_phase, {}
            start = position if index == position.phase else run_state.Position(phase=index)
            try:
                metrics = self._run_phase(index, phase, start, history)
            except StopPoint as stop:  # the resume checkpoint of the stop step is written
                self.writer.flush()
                self.stopped = {"step": self._global_step(index), "metrics": stop.metrics}
                return per_phase, stop.metrics or {}
            except TrainingError as e:  # NaN: say what is kept and what to try
                kept = self.state.last_good
                raise type(e)(f"{e} (phase {phase.name}); the last good checkpoint "
                              + (f"{kept} is kept" if kept else "does not exist yet")
                              + "; a smaller --learning_rate may help") from None
            per_phase[phase.name] = metrics
            atomic_write_json(self.phase_metrics_path, per_phase)
            self.state.save(index + 1, 0)  # the phase is complete: a resume starts the next one
        self.writer.flush()
        if self.grad_groups:
            run_folder.write_grad_norms(self.config.output_dir, self.grad_rows)
        if self.trajectory is not None:
            self.trajectory.finish()  # θ1
        return per_phase, metrics

    def _global_step(self, index):
        """Steps of the run so far: the earlier phases' and this phase's optimizer steps."""
        done = sum(t for _, t in self.steps[:index])
        if index < len(self.phases):
            done += int(self.optimizers[self.phases[index].name].iterations.numpy())
        return done

    def _history_until(self, position):
        """history.csv without the rows of epochs the checkpoint does not include (written
        by the killed run after its last checkpoint; they will be written again)."""
        order = {phase.name: i for i, phase in enumerate(self.phases)}
        return [row for row in run_folder.read_run_history(self.config.output_dir)
                if (order.get(row["phase"], len(order)), int(row["epoch"]))
                <= (position.phase, position.epoch)]

    def _examples_in(self, first_batch, num_batches):
        size = self.config.train_batch_size
        return sum(min(size, self.rows - b * size)
                   for b in range(first_batch, first_batch + num_batches))

    def _run_phase(self, index, phase, start, history):
        config, optimizer = self.config, self.optimizers[phase.name]
        self.model.set_backbone_trainable(phase.train_backbone)
        trainer = Trainer(self.model, self.kind, self.strategy, optimizer,
                          loss_scale=self.loss_scales.get(phase.name),
                          **trainer_options(config))
        per_epoch, total = self.steps[index]
        step_offset = sum(t for _, t in self.steps[:index])  # a global step for TensorBoard
        best, since_best, metrics = start.best, start.since_best, {}
        main_metric = self.task.main_metric
        every = config.save_checkpoints_steps
        # The phase's own peak memory (history.csv), not an earlier phase's or run's.
        measures_memory = memory.reset_peak_rss()

        progress = Progress(phase.name, total, config.train_batch_size, self.log)
        epochs = math.ceil(phase.num_epochs)

        norm_sum = [None]  # the current epoch's summed gradient norms per group, and steps

        def on_step(step, loss):
            progress.step(step, loss, epoch + 1, epochs)
            norms = trainer.last_grad_norms
            recorded = norms is not None and (step_offset + step) % config.grad_norm_every == 0
            with self.writer.as_default(step=step_offset + step):
                tf.summary.scalar("train/loss", loss)
                tf.summary.scalar("train/learning_rate", trainer.learning_rate())
                if recorded:
                    for group, value in zip(self.grad_groups, norms):
                        tf.summary.scalar(f"grad_norm/{group}", value)
            if norms is not None and np.isfinite(norms).all():  # not float16's skipped steps
                norm_sum[0] = norm_sum[0] + np.append(norms.astype(float), 1.0)
            if recorded:
                self.grad_rows.append(
                    {"phase": phase.name, "step": step_offset + step,
                     **{f"grad_norm/{g}": _sig(v) for g, v in zip(self.grad_groups, norms)}})
            if self.trajectory is not None:
                self.trajectory.on_step(step_offset + step)
            faults.crash_point("train_step")

        stopped = phase.patience is not None and since_best >= phase.patience  # killed after
        for epoch in range(start.epoch, 0 if stopped else math.ceil(phase.num_epochs)):
            steps = min(per_epoch, total - epoch * per_epoch)
            dataset = pipeline.dataset_of(
                self.train, config.train_batch_size,
                shuffle_seed=config.seed_of("data_order") + 1000 * index + epoch,
                labels_per_token=self.kind.labels_per_token,
                group_by_length=config.length_group_batches if config.group_by_length else 0)
            # The epoch runs in pieces that end on multiples of --save_checkpoints_steps;
            # after each, a checkpoint records how far it got. A resumed epoch skips the
            # batches already trained on (same seed, same order) and sums on from there.
            part = start if epoch == start.epoch else run_state.Position()
            done, loss_sum, correct, seen = part.step, part.loss_sum, part.correct, part.seen
            norm_sum[0] = np.array(part.grad_norm_sum or [0.0] * (len(self.grad_groups) + 1))
            while done < steps:
                count = steps - done
                if every:
                    count = min(count, every - int(optimizer.iterations.numpy()) % every)
                if self.stop_step is not None and self.stop_step > self._global_step(index):
                    count = min(count, self.stop_step - self._global_step(index))
                loss, accuracy = trainer.train_epoch(dataset.skip(done), count, on_step=on_step)
                examples = self._examples_in(done, count)
                loss_sum += loss * count
                correct += (accuracy or 0.0) * examples
                seen += examples
                done += count
                if done < steps:
                    self.writer.flush()
                    if self.grad_groups:
                        run_folder.write_grad_norms(config.output_dir, self.grad_rows)
                    self.state.save(index, epoch, run_state.Position(
                        step=done, loss_sum=loss_sum, correct=correct, seen=seen,
                        best=best, since_best=since_best,
                        grad_norm_sum=tuple(norm_sum[0].tolist())))
                    if self._global_step(index) == self.stop_step:
                        raise StopPoint(None)  # mid-epoch: dev is evaluated by the caller
            progress.epoch_end(int(optimizer.iterations.numpy()), epoch + 1, epochs)
            train_loss = loss_sum / max(done, 1)
            train_accuracy = correct / max(seen, 1) if self.kind.has_accuracy else None
            evaluated = time.perf_counter()
            metrics = self.dev_metrics(trainer) if config.do_eval else {}
            # The dev evaluation's own share of `seconds` (cumulative train + dev time), so
            # that training time can be told apart (benchmarks/parity.py compares both).
            eval_seconds = time.perf_counter() - evaluated
            row = {"phase": phase.name, "epoch": epoch + 1,
                   "step": step_offset + int(optimizer.iterations.numpy()),
                   "train_loss": round(train_loss, 6),
                   "learning_rate": trainer.learning_rate(),
                   "seconds": round(self.timer.seconds(), 1),
                   "eval_seconds": round(eval_seconds, 1),
                   "trained_parameters": self.trained_parameters[phase.name]}
            if measures_memory:
                row["peak_rss_mb"] = round(memory.peak_rss_mb(), 1)
            if train_accuracy is not None:
                row["train_accuracy"] = round(train_accuracy, 6)
                if "accuracy" in metrics:  # Wang et al.'s overfitting signal
                    row["train_dev_gap"] = round(train_accuracy - metrics["accuracy"], 6)
            row.update({f"dev_{k}": round(v, 6) for k, v in metrics.items()})
            if self.grad_groups and trainer.last_grad_norms is not None:
                # Mosbach et al. (2021): a failed run's norms end ~100x smaller.
                *sums, summed = norm_sum[0]
                row.update({f"grad_norm/{g}": _sig(v / summed) if summed else ""
                            for g, v in zip(self.grad_groups, sums)})
                row.update({f"grad_norm_last/{g}": _sig(v)
                            for g, v in zip(self.grad_groups, trainer.last_grad_norms)})
            history.append(row)
            run_folder.write_run_history(config.output_dir, history)
            if self.grad_groups:
                run_folder.write_grad_norms(config.output_dir, self.grad_rows)
            with self.writer.as_default(step=row["step"]):
                for k, v in metrics.items():
                    tf.summary.scalar(f"dev/{k}", v)
            self.writer.flush()
            shown = ("train_loss", "train_accuracy", "train_dev_gap", f"dev_{main_metric}")
            self.log(f"{phase.name} epoch {epoch + 1}/{math.ceil(phase.num_epochs)}: "
                     + " ".join(f"{k}={row[k]:.4f}" for k in shown if k in row)
                     + f" ({row['seconds']:.0f} s; all metrics in history.csv)")
            stop = False
            if phase.patience is not None and main_metric in metrics:
                if improves(main_metric, metrics[main_metric], best,
                            greater_is_better(main_metric, self.task, self.kind)):
                    best, since_best = metrics[main_metric], 0
                    run_state.save_layer_weights(self.model.head, self.best_head_path)
                else:
                    since_best += 1
                    stop = since_best >= phase.patience
            self.state.save(index, epoch + 1, run_state.Position(best=best,
                                                                     since_best=since_best))
            if self._global_step(index) == self.stop_step:
                raise StopPoint(metrics)  # an epoch's end: its dev metrics are the stop's
            if stop:
                self.log(f"kerasbert: {phase.name}: no {main_metric} gain for {phase.patience} "
                         f"epochs; restoring the best head (dev {main_metric}={best:.4f})")
                break
        if phase.patience is not None and storage.exists(self.best_head_path):
            run_state.load_layer_weights(self.model.head, self.best_head_path)
            metrics = self.dev_metrics(trainer) if config.do_eval else metrics
        elif not metrics and config.do_eval:  # resumed after the last epoch's checkpoint
            metrics = self.dev_metrics(trainer)
        return metrics


def _sig(value):
    """A gradient norm as 6 significant digits (a failed run's are tiny: no fixed decimals)."""
    return float(f"{float(value):.6g}")
