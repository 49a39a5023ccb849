"""How long an epoch goes on after its last step: Trainer.train_epoch on a tiny model.

    python -m benchmarks.bench_epoch_end --replicas=2 --steps=60 --pause=0.3 --epochs=4
    python -m benchmarks.bench_epoch_end --replicas=2 ... --tensorflow_defaults   # the wait back

tf.data's autotuning thread sleeps in waits that double up to 60 s, and an iterator
destroyed beside a training step waited for the sleep to end: seconds to a minute lost at
the end of an epoch. kerasbert's batches carry no autotuning, one replica iterates the
dataset itself, and several replicas' per-device datasets are made without it
(kerasbert/data/pipeline.py); `--tensorflow_defaults` leaves TensorFlow's per-device
datasets as they come, to see the wait. `--replicas=N` splits the CPU into N virtual
devices under MirroredStrategy (1: the one-device strategy). Each step is followed by a
`--pause` on the host so that an epoch lasts long enough for the sleeps to grow without
much computing. Prints one line per epoch and, with --json, writes them.
"""

import argparse
import json
import sys
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--steps", type=int, default=60, help="steps per epoch")
    p.add_argument("--pause", type=float, default=0.3, help="host seconds after each step")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--tensorflow_defaults", action="store_true",
                   help="per-device datasets as TensorFlow makes them (autotuning on)")
    p.add_argument("--json", help="write the epochs here")
    args = p.parse_args(argv)
    if args.replicas < 1 or args.steps < 1 or args.epochs < 1 or args.pause < 0:
        p.error("--replicas, --steps and --epochs must be positive, --pause not negative")

    from kerasbert import distribute
    if args.replicas > 1:
        distribute.split_cpu(args.replicas)  # before TensorFlow initialises its devices
    import tensorflow as tf

    from kerasbert import plugins
    from kerasbert.data import pipeline
    from kerasbert.model import builder, encoders
    from kerasbert.training import optimization
    from kerasbert.training.loop import Trainer

    if args.tensorflow_defaults:
        pipeline.device_datasets_without_autotuning = lambda: None
    strategy = (tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.replicas)])
                if args.replicas > 1 else distribute.make_strategy("one_device"))
    registry = plugins.registry()
    task, head = registry.task("sst2"), registry.head("cls_linear")
    batch = 4 * args.replicas
    rng = np.random.default_rng(0)
    tokens = rng.integers(1000, 2000, [batch * args.steps, 16]).astype(np.int32)
    inputs = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens),
              "padding_mask": np.ones_like(tokens)}
    labels = (tokens[:, 0] % 2).astype(np.int32)
    with strategy.scope():
        encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.0, seed=3)
        model = builder.build_task_model(task, head, encoder.backbone, seed=3)
        optimizer = optimization.create_optimizer(model.trainable_variables, 1e-3, 10**6,
                                                  warmup_steps=0)
        optimizer.build(model.trainable_variables)
    trainer = Trainer(model, task.kind, strategy, optimizer)
    epochs, last_step = [], [0.0]

    def on_step(step, loss):
        time.sleep(args.pause)
        last_step[0] = time.perf_counter()

    for epoch in range(args.epochs):
        start = time.perf_counter()
        trainer.train_epoch(pipeline.make_dataset(inputs, labels, batch, shuffle_seed=epoch),
                            args.steps, on_step=on_step, show_progress=False)
        end = time.perf_counter()
        epochs.append({"epoch": epoch + 1, "seconds": end - start,
                       "after_last_step_seconds": end - last_step[0]})
        print(f"epoch {epoch + 1}: {end - start:.1f} s, {end - last_step[0]:.2f} s of it "
              f"after the last step", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "tensorflow": tf.__version__, "epochs": epochs}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
