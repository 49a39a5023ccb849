"""Benchmark: points per second of a 2D loss-landscape grid (kerasbert.landscape.surface).

Times a G×G grid around a model's weights along two random directions, evaluating the
training loss and dev error on fixed samples at every point, two ways in the same process:

  kerasbert   SurfaceEvaluator: the point is assigned inside a tf.function from direction
              constants, the forward pass is one traced function, batches built once
  naive       per point: θ computed in numpy, assigned weight by weight, then
              `model.predict` on a fresh tf.data pipeline (the obvious Keras loop)

Each way evaluates --repeats grids after a warm-up point; the median grid time is reported.

Then Hessian-vector products per second of the training loss on the training sample
(kerasbert.landscape.hessian.TrainingLoss), each --hvp way, after one product that traces:
forward_over_backward (ForwardAccumulator over a GradientTape) and double_backward (a
tape over a tape); a gradient's time beside them for scale.

    python -m benchmarks.bench_landscape                       # tiny random model, 21×21
    python -m benchmarks.bench_landscape --model_size=6/384/12 --grid=5 --sample=128
    python -m benchmarks.bench_landscape --model_size=6/384/12 --grid=0 --sample=32 --hvps=3
"""

import argparse
import statistics
import sys
import time

import numpy as np



def build(args):
    from kerasbert import plugins
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.model import builder, encoders

    registry = plugins.registry()
    task = registry.task(args.task)
    encoder = encoders.random_encoder(args.model_size, seed=0)
    tokenizer = WordPieceTokenizer(encoder.vocab_file, encoder.do_lower_case)
    model = builder.build_task_model(task, registry.head(task.default_head), encoder.backbone,
                                     seed=0, sample_inputs=builder.dummy_inputs(
                                         task.kind, args.max_seq_length))
    data_dir = args.data_dir or task.sample_dir()
    samples = {}
    for name, split in (("train", "train"), ("dev", task.dev_splits[0])):
        examples = task.read_examples(data_dir, split)[: args.sample]
        samples[name] = task.featurize(examples, tokenizer, args.max_seq_length)
    return task, model, samples


def naive_grid(model, task, samples, theta, d1, d2, alphas, betas, batch_size):
    from kerasbert.data import pipeline
    from kerasbert.training.trajectory import assign

    for b in betas:
        for a in alphas:
            assign(model, [t + a * x + b * y for t, x, y in zip(theta, d1, d2)])
            for features in samples.values():
                outputs = model.predict(pipeline.make_dataset(features.inputs, None, batch_size),
                                        verbose=0)
                logits = outputs - outputs.max(axis=1, keepdims=True)
                log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
                _ = -log_probs[np.arange(len(features.labels)), features.labels].mean()
                task.evaluate(outputs, features)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_size", default="tiny", help="Random encoder size (L/H/A).")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--data_dir", help="The task's data (default: the bundled sample).")
    parser.add_argument("--sample", type=int, default=128, help="Examples per split.")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--grid", type=int, default=21)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--naive_grid", type=int, default=7,
                        help="Grid of the (slow) naive loop; 0 skips it. Rates are compared.")
    parser.add_argument("--hvps", type=int, default=3,
                        help="Timed Hessian-vector products per --hvp way (0 skips them).")
    parser.add_argument("--hvp_batch_size", type=int, default=32,
                        help="Batch size of the products (the landscape's --hessian_batch_size).")
    args = parser.parse_args(argv)
    if args.grid < 0 or args.hvps < 0:
        parser.error("--grid and --hvps must be at least 0")

    from kerasbert.landscape import directions
    from kerasbert.training.trajectory import snapshot, weight_names

    task, model, samples = build(args)
    theta, names = snapshot(model), weight_names(model)
    d1 = directions.random_direction(theta, names, seed=1, scale="weights")
    d2 = directions.random_direction(theta, names, seed=2, orthogonal_to=d1, scale="weights")
    d1, d2 = [x * np.float32(0.1) for x in d1], [x * np.float32(0.1) for x in d2]
    alphas = betas = np.linspace(-1, 1, args.grid)
    sizes = {k: len(f.labels) for k, f in samples.items()}
    print(f"model {args.model_size} ({sum(w.size for w in theta):,} weights), task "
          f"{args.task}, samples {sizes}, max_seq_length {args.max_seq_length}, "
          f"grid {args.grid}×{args.grid}")

    if args.grid:
        grid_benchmark(args, model, task, samples, theta, d1, d2, alphas, betas)
    if args.hvps:
        hvp_benchmark(args, model, samples["train"])
    return 0


def hvp_benchmark(args, model, features):
    from kerasbert.landscape import hessian
    from kerasbert.plugins import resolve_kind

    kind = resolve_kind("classification")
    batches = hessian.sample_batches(features, args.hvp_batch_size, kind)
    print(f"\nHessian-vector products over {len(features.labels)} training rows, batches of "
          f"{args.hvp_batch_size}")
    print("| way | first (traces) | median | HVPs/s | runs (s) |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for way in hessian.HVP_METHODS:
        loss = hessian.TrainingLoss(model, kind, batches, hvp=way)
        vector = rng.standard_normal(loss.size)
        start = time.perf_counter()
        loss.hvp(vector)
        first = time.perf_counter() - start
        seconds = []
        for _ in range(args.hvps):
            start = time.perf_counter()
            loss.hvp(vector)
            seconds.append(time.perf_counter() - start)
        median = statistics.median(seconds)
        print(f"| {way} | {first:.1f} s | {median:.2f} s | {1 / median:.3g} | "
              + ", ".join(f"{s:.2f}" for s in seconds) + " |")
    loss.value_and_gradient()  # traces
    start = time.perf_counter()
    loss.value_and_gradient()
    print(f"| (one gradient, for scale) | | {time.perf_counter() - start:.2f} s | | |")


def grid_benchmark(args, model, task, samples, theta, d1, d2, alphas, betas):
    from kerasbert.landscape import surface

    evaluator = surface.SurfaceEvaluator(model, task, samples, args.batch_size)
    evaluator.set_plane(theta, d1, d2)
    evaluator.at(0.0, 0.0)  # warm-up: traces the move and forward functions
    timings = {"kerasbert": []}
    for _ in range(args.repeats):
        start = time.perf_counter()
        surface.grid(evaluator, theta, d1, d2, alphas, betas)
        timings["kerasbert"].append(time.perf_counter() - start)
    grids = {"kerasbert": args.grid}
    if args.naive_grid:
        timings["naive"], grids["naive"] = [], args.naive_grid
        naive_axis = np.linspace(-1, 1, args.naive_grid)
        naive_grid(model, task, samples, theta, d1, d2, [0.0], [0.0], args.batch_size)  # warm-up
        for _ in range(args.repeats):
            start = time.perf_counter()
            naive_grid(model, task, samples, theta, d1, d2, naive_axis, naive_axis,
                       args.batch_size)
            timings["naive"].append(time.perf_counter() - start)
    print("| way | grid | median grid time | points/s | runs (s) |")
    print("|---|---|---|---|---|")
    rates = {}
    for way, seconds in timings.items():
        median = statistics.median(seconds)
        rates[way] = grids[way] ** 2 / median
        print(f"| {way} | {grids[way]}×{grids[way]} | {median:.1f} s | {rates[way]:.2f} | "
              + ", ".join(f"{s:.1f}" for s in seconds) + " |")
    if "naive" in rates:
        print(f"kerasbert evaluates {rates['kerasbert'] / rates['naive']:.2f}× as many points "
              "per second as the naive loop (same run)")


if __name__ == "__main__":
    sys.exit(main())
