"""Training phases: frozen encoder first (stack-and-finetune's phase 1), then everything.

    --frozen_epochs=N --frozen_learning_rate=LR --frozen_patience=P   phase 1 ("frozen")
    --num_train_epochs=M --learning_rate=LR                           phase 2 ("finetune")

fine-tune only: N = 0; frozen only (feature-based): M = 0; stack-and-finetune: both.
Each phase has its own AdamW state and warmup/decay schedule. In the frozen phase the
encoder also runs without dropout (inference mode): its outputs are then fixed features,
exactly what a cached-feature run would see, and its weights stay bit-identical.
"""

import dataclasses
import math
import os

import tensorflow as tf

from kerasbert.data import pipeline
from kerasbert.io_utils import read_history, write_history
from kerasbert.training import checkpointing, optimization
from kerasbert.training.loop import Timer, Trainer, count_steps, trainer_options


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str  # "frozen" or "finetune"
    num_epochs: float
    learning_rate: float
    train_backbone: bool
    patience: int | None = None  # early stopping on the dev main metric (frozen phase)


def plan_phases(config):
    phases = []
    if config.frozen_epochs > 0:
        phases.append(Phase("frozen", config.frozen_epochs, config.frozen_learning_rate,
                            train_backbone=False, patience=config.frozen_patience))
    if config.num_train_epochs > 0:
        phases.append(Phase("finetune", config.num_train_epochs, config.learning_rate,
                            train_backbone=True))
    return phases


class PhaseRunner:
    """Runs the planned phases epoch by epoch: train, evaluate, log, checkpoint, resume."""

    def __init__(self, model, strategy, task, config, train, evaluate, log):
        self.model, self.strategy, self.task, self.config = model, strategy, task, config
        self.train, self.evaluate, self.log = train, evaluate, log
        self.phases = plan_phases(config)
        self.steps = [count_steps(len(train.examples), config.train_batch_size, p.num_epochs)
                      for p in self.phases]
        with strategy.scope():
            self.optimizers = {}
            for phase, (_, total) in zip(self.phases, self.steps):
                model.set_backbone_trainable(phase.train_backbone)
                optimizer = optimization.create_optimizer(
                    model.trainable_variables, phase.learning_rate, total,
                    warmup_steps=int(total * config.warmup_proportion),
                    weight_decay=config.weight_decay)
                optimizer.build(model.trainable_variables)
                self.optimizers[phase.name] = optimizer
        self.state = checkpointing.RunState(config.output_dir, model, self.optimizers)
        self.history_path = os.path.join(config.output_dir, "history.csv")
        self.best_head_path = os.path.join(config.output_dir, "checkpoints", "best_head.npz")
        self.writer = tf.summary.create_file_writer(os.path.join(config.output_dir, "tensorboard"))
        self.timer = Timer()

    def run(self):
        """Trains every phase; returns ({phase: dev metrics at its end}, last dev metrics)."""
        start_phase, start_epoch = self.state.restore()
        if start_phase or start_epoch:
            self.log(f"kerasbert: resuming at phase {start_phase + 1}, after epoch "
                     f"{start_epoch}, from {self.state.directory}")
        history = read_history(self.history_path) if (start_phase or start_epoch) else []
        per_phase, metrics = {}, {}
        for index in range(start_phase, len(self.phases)):
            phase = self.phases[index]
            first_epoch = start_epoch if index == start_phase else 0
            metrics = self._run_phase(index, phase, first_epoch, history)
            per_phase[phase.name] = metrics
        return per_phase, metrics

    def _run_phase(self, index, phase, first_epoch, history):
        config, optimizer = self.config, self.optimizers[phase.name]
        self.model.set_backbone_trainable(phase.train_backbone)
        trainer = Trainer(self.model, self.task.kind, self.strategy, optimizer,
                          **trainer_options(config))
        per_epoch, total = self.steps[index]
        step_offset = sum(t for _, t in self.steps[:index])  # a global step for TensorBoard
        best, since_best, metrics = None, 0, {}
        main_metric = self.task.main_metric

        def on_step(step, loss):
            with self.writer.as_default(step=step_offset + step):
                tf.summary.scalar("train/loss", loss)
                tf.summary.scalar("train/learning_rate", trainer.learning_rate())

        for epoch in range(first_epoch, math.ceil(phase.num_epochs)):
            steps = min(per_epoch, total - epoch * per_epoch)
            dataset = pipeline.make_dataset(
                self.train.inputs, self.train.labels, config.train_batch_size,
                shuffle_seed=config.seed + 1000 * index + epoch,
                labels_per_token=self.task.kind == "tagging")
            train_loss, train_accuracy = trainer.train_epoch(dataset, steps, on_step=on_step)
            metrics = self.evaluate(trainer) if config.do_eval else {}
            row = {"phase": phase.name, "epoch": epoch + 1,
                   "step": step_offset + int(optimizer.iterations.numpy()),
                   "train_loss": round(train_loss, 6),
                   "learning_rate": trainer.learning_rate(),
                   "seconds": round(self.timer.seconds(), 1)}
            if train_accuracy is not None:
                row["train_accuracy"] = round(train_accuracy, 6)
                if "accuracy" in metrics:  # Wang et al.'s overfitting signal
                    row["train_dev_gap"] = round(train_accuracy - metrics["accuracy"], 6)
            row.update({f"dev_{k}": round(v, 6) for k, v in metrics.items()})
            history.append(row)
            write_history(self.history_path, history)
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
                if best is None or metrics[main_metric] > best:
                    best, since_best = metrics[main_metric], 0
                    checkpointing.save_layer_weights(self.model.head, self.best_head_path)
                else:
                    since_best += 1
                    stop = since_best >= phase.patience
            self.state.save(index, epoch + 1)
            if stop:
                self.log(f"kerasbert: {phase.name}: no {main_metric} gain for {phase.patience} "
                         f"epochs; restoring the best head (dev {main_metric}={best:.4f})")
                break
        if phase.patience is not None and os.path.exists(self.best_head_path):
            checkpointing.load_layer_weights(self.model.head, self.best_head_path)
            metrics = self.evaluate(trainer) if config.do_eval else metrics
        self.state.save(index + 1, 0)  # the phase is complete: a resume starts the next one
        return metrics

