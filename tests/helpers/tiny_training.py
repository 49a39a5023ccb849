"""The tiny training run the scaling and distribution tests compare (tests/training/
test_scaling.py, and tests/test_distribute.py in a fresh process): a 2-layer, hidden-32
model (dropout 0, so runs are deterministic) with the cls_linear head on sst2, trained on
synthetic batches."""

import numpy as np

from kerasbert import distribute, plugins
from kerasbert.data import pipeline
from kerasbert.model import builder, encoders
from kerasbert.training import optimization, phases, precision
from kerasbert.training.loop import Trainer

BATCH, STEPS, SEQ = 8, 4, 16


def synthetic_data(num_examples=BATCH * STEPS, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, SEQ + 1, num_examples)
    lengths[::BATCH] = SEQ  # every batch is as long: one traced shape, a faster test
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    tokens = rng.integers(1000, 2000, [num_examples, SEQ]) * mask
    inputs = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens), "padding_mask": mask}
    # Learnable: the label is whether the first real token's id is even.
    return inputs, (tokens[:, 0] % 2).astype(np.int32)


def train(strategy=None, policy="none", steps=STEPS, learning_rate=1e-3,
          head_learning_rate=None, data=None, grad_norms=None, **trainer_options):
    """(per-step losses, final weights) of a fresh tiny model trained `steps` steps on
    `data` (inputs, labels), by default `synthetic_data()`; `grad_norms`: a list that gets
    each step's gradient norms per group (the Trainer's grad_norms)."""
    precision.set_policy(policy)
    strategy = strategy or distribute.make_strategy("one_device")
    registry = plugins.registry()
    task, head = registry.task("sst2"), registry.head("cls_linear")
    inputs, labels = data or synthetic_data()
    with strategy.scope():
        encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.0, seed=3)
        model = builder.build_task_model(task, head, encoder.backbone, seed=3)
        optimizer = optimization.create_optimizer(
            model.trainable_variables, learning_rate, steps, warmup_steps=0,
            head_variables=phases.head_variables(model), head_learning_rate=head_learning_rate)
        optimizer.build(model.trainable_variables)
    trainer = Trainer(model, task.kind, strategy, optimizer,
                      grad_norms=grad_norms is not None, **trainer_options)
    losses = []

    def on_step(step, loss):
        losses.append(loss)
        if grad_norms is not None:
            grad_norms.append(trainer.last_grad_norms.tolist())

    trainer.train_epoch(pipeline.make_dataset(inputs, labels, BATCH), steps,
                        on_step=on_step, show_progress=False)
    weights = [w.numpy().astype(np.float32) for w in model.weights]
    precision.set_policy("none")
    return np.array(losses), weights
