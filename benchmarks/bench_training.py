"""Benchmark: one full fine-tuning step, kerasbert's Trainer vs HuggingFace on PyTorch.

Same weights (the MiniLM-L6 safetensors by default; the classifier from one seeded
initialisation), same batch (random word pieces filling every position), same step:
forward, cross-entropy, backward, global-norm clip 1.0, AdamW. Each framework runs in its
own process (so peak memory is its own), one after the other (so they do not share the
cores); with --rounds=N the sides alternate N times, so that load from other jobs falls on
both. kerasbert runs as each of --variants: `plain` (the graph-mode step) and `xla`
(--jit_compile). Prints one table: median step time, examples/s, tokens/s, model FLOP/s
against a dense float32 matmul measured in the same process, peak RSS, and the time from
process start to the model being loaded and from there to the end of the first step; then
each variant's throughput against PyTorch's, per round and overall.

    python -m benchmarks.bench_training --rounds=3 --torch_python=<python with torch>
    python -m benchmarks.bench_training --variants=xla --mixed_precision=mixed_bfloat16  # a GPU
    python -m benchmarks.bench_training --variants=plain,norms --rounds=3  # the norms' cost

The PyTorch side needs an interpreter with torch and transformers (never a kerasbert
dependency; see README, Speed), named by --torch_python or $KERASBERT_TORCH_PYTHON;
without either it is skipped with a message.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

START = time.time()

from benchmarks.processes import (  # noqa: E402  (after START: the worker's clock)
    add_torch_python_flag, child_env, missing_interpreter, module_command)


def model_flops_per_step(config, batch_size, seq_length):
    """Matmul FLOPs of one training step (backward ≈ 2× forward), embeddings excluded."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config[
        "num_hidden_layers"]
    per_layer = 2 * seq_length * (4 * h * h + 2 * h * inter) + 4 * seq_length**2 * h
    forward = layers * per_layer + 2 * h * h + 2 * h * 2  # + pooler + classifier
    return 3 * forward * batch_size


def make_batch(path, vocab_size, hidden, batch_size, seq_length, seed=0, padded_positions=0):
    """The benchmark's batch; with `padded_positions` k, every other row ends in k [PAD]s
    (mask 0), as a per-batch-padded batch of real text does: an attention mask that is not
    all ones, which some attention kernels take a slower path for."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1000, vocab_size, [batch_size, seq_length]).astype(np.int32)
    tokens[:, 0], tokens[:, -1] = 101, 102  # [CLS] ... [SEP] (BERT uncased ids)
    mask = np.ones_like(tokens)
    if padded_positions:
        short = np.arange(batch_size) % 2 == 1
        end = seq_length - padded_positions
        tokens[short, end - 1] = 102
        tokens[short, end:], mask[short, end:] = 0, 0
    limit = np.sqrt(6.0 / (hidden + 2))  # Glorot-uniform, like a fresh Keras Dense
    np.savez(path, token_ids=tokens, segment_ids=np.zeros_like(tokens),
             padding_mask=mask,
             labels=rng.integers(0, 2, batch_size).astype(np.int32),
             head_kernel=rng.uniform(-limit, limit, [hidden, 2]).astype(np.float32),
             head_bias=np.zeros([2], np.float32))


def tf_matmul_flops(size=2048, repeats=10, dtype="float32"):
    """A dense size² matmul's FLOP/s in `dtype` (the step's compute dtype: bfloat16 under
    mixed_bfloat16), on the default device."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal([size, size]), dtype)
    b = tf.cast(tf.random.normal([size, size]), dtype)
    tf.matmul(a, b).numpy()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        tf.matmul(a, b).numpy()
        times.append(time.perf_counter() - t)
    return 2 * size**3 / float(np.median(times))


def build_step(args, data):
    """The benchmark's step in this process: (model, Trainer, endless dataset of the one
    batch, seconds from process start to the model being loaded). `args` carries
    mixed_precision, model_size, checkpoint, jit_compile, gradient_accumulation_steps;
    `data` is make_batch's file, loaded. benchmarks/profile_step.py profiles the same step."""
    from kerasbert import distribute, plugins
    from kerasbert.data import pipeline
    from kerasbert.model import builder, encoders
    from kerasbert.training import optimization, precision
    from kerasbert.training.loop import Trainer

    precision.set_policy(args.mixed_precision)
    strategy = distribute.make_strategy("one_device")
    registry = plugins.registry()
    task, head = registry.task("sst2"), registry.head("cls_linear")
    with strategy.scope():
        if args.model_size:  # random weights of a given shape (no checkpoint needed)
            encoder = encoders.random_encoder(args.model_size, seed=0)
        else:
            encoder = encoders.load_encoder(args.checkpoint)
        model = builder.build_task_model(task, head, encoder.backbone, seed=0)
        model.head.output_dense.kernel.assign(data["head_kernel"])
        model.head.output_dense.bias.assign(data["head_bias"])
        optimizer = optimization.create_optimizer(  # constant 2e-5, as the reference
            model.trainable_variables, 2e-5, total_steps=10**9, warmup_steps=0)
        optimizer.build(model.trainable_variables)
    loaded = time.time() - START
    trainer = Trainer(model, task.kind, strategy, optimizer, jit_compile=args.jit_compile,
                      accumulation_steps=args.gradient_accumulation_steps,
                      grad_norms=getattr(args, "grad_norms", False))  # profile_step has no --grad_norms
    inputs = {k: data[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    dataset = pipeline.make_dataset(inputs, data["labels"], len(data["labels"])).repeat()
    return model, trainer, dataset, loaded


def kerasbert_worker(args):
    """The kerasbert side (in its own process): prints one JSON line."""
    import tensorflow as tf

    # what build_step uses, imported here so that the import time is measured on its own
    from kerasbert.model import builder, encoders  # noqa: F401
    from kerasbert.training import loop, optimization  # noqa: F401

    imported = time.time() - START
    model, trainer, dataset, loaded = build_step(args, np.load(args.data))
    stamps, losses = [time.perf_counter()], []

    def on_step(step, loss):
        stamps.append(time.perf_counter())
        losses.append(loss)

    trainer.train_epoch(dataset, args.warmup + args.steps, on_step=on_step,
                        show_progress=False)
    first_step = loaded + (stamps[1] - stamps[0])
    print(json.dumps({
        "framework": f"kerasbert Trainer (TF {tf.__version__}"
                     + (", XLA" if args.jit_compile else "")
                     + (", gradient norms" if args.grad_norms else "")
                     + (f", {args.mixed_precision}" if args.mixed_precision != "none" else "")
                     + ")",
        "import_seconds": imported, "loaded_seconds": loaded, "first_step_seconds": first_step,
        "step_times": list(np.diff(stamps))[args.warmup:], "losses": losses,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "matmul_flops": tf_matmul_flops(args.matmul_size, dtype=keras_compute_dtype()),
        "matmul_dtype": keras_compute_dtype(),
        "device": gpu_name() or "CPU",
        "threads": tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count(),
        "params": int(sum(np.prod(v.shape) for v in model.weights))}))


def keras_compute_dtype():
    import keras

    return keras.config.dtype_policy().compute_dtype


def gpu_name():
    """The first GPU's name as TensorFlow reports it, or None."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")


def shape_of(model_size, vocab_size):
    """A config.json-like dict for --model_size=L/H/A (feed-forward 4·H, as BERT)."""
    layers, hidden, heads = (int(x) for x in model_size.split("/"))
    return {"num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
            "intermediate_size": 4 * hidden, "vocab_size": vocab_size}


def run_side(command, label):
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False,
                            env=child_env())
    if result.returncode != 0:
        sys.exit(f"bench_training: the {label} side failed:\n{result.stderr[-3000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["wall_seconds"] = time.perf_counter() - started
    return report


def _median(values):
    return float(np.median(values))


def merge_rounds(reports):
    """One report per side from its rounds: all timed steps pooled (their median is the
    row's), start-up times as medians, the peak memory as the maximum."""
    merged = dict(reports[0])
    merged["step_times"] = [t for r in reports for t in r["step_times"]]
    for key in ("loaded_seconds", "first_step_seconds", "matmul_flops"):
        merged[key] = _median([r[key] for r in reports])
    merged["peak_rss_mb"] = max(r["peak_rss_mb"] for r in reports)
    merged["round_steps"] = [_median(r["step_times"]) for r in reports]
    return merged


def table(sides, flops_per_step, batch_size, seq_length):
    """`sides`: {label: merged report}; the PyTorch side, if any, is labelled "pytorch"."""
    header = ("| framework | step s (median) | examples/s | tokens/s | model GFLOP/s | "
              "% of matmul GFLOP/s | peak RSS MB | start → model loaded s | "
              "model loaded → 1st step done s |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for r in sides.values():
        step = _median(r["step_times"])
        achieved = flops_per_step / step
        lines.append(
            f"| {r['framework']} | {step:.3f} | {batch_size / step:.1f} | "
            f"{batch_size * seq_length / step:.0f} | {achieved / 1e9:.1f} | "
            f"{100 * achieved / r['matmul_flops']:.0f}% of {r['matmul_flops'] / 1e9:.0f} | "
            f"{r['peak_rss_mb']:.0f} | {r['loaded_seconds']:.1f} | "
            f"{r['first_step_seconds'] - r['loaded_seconds']:.1f} |")
    reference = sides.get("pytorch")
    if reference is not None:
        lines.append("")
        for label, r in sides.items():
            if label == "pytorch":
                continue
            ratio = _median(reference["step_times"]) / _median(r["step_times"])
            per_round = ", ".join(f"{t / k:.2f}" for k, t in zip(r["round_steps"],
                                                                  reference["round_steps"]))
            lines.append(f"kerasbert {label} throughput / PyTorch throughput = {ratio:.2f} "
                         f"(>1: kerasbert faster; per round: {per_round})")
        lines.append(f"model FLOPs per step {flops_per_step / 1e9:.1f} G")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=None, help="a HuggingFace BERT folder "
                        "(config.json, model.safetensors); default: installed MiniLM-L6")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--padded_positions", type=int, default=0,
                        help="every other row ends in this many [PAD]s (an attention mask "
                        "that is not all ones, as with per-batch padding); default 0")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing)")
    parser.add_argument("--variants", default="plain,xla",
                        help="kerasbert steps to time: plain (graph mode), xla (--jit_compile), "
                        "norms (plain, also measuring the per-group gradient norms, as "
                        "--grad_norm_every does)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the sides this many times (robust to other load)")
    parser.add_argument("--jit_compile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--grad_norms", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mixed_precision", default="none",
                        choices=["none", "mixed_float16", "mixed_bfloat16"])
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    add_torch_python_flag(parser, "the reference side")
    parser.add_argument("--model_size", default=None, help="L/H/A: random weights of this "
                        "shape instead of --checkpoint (e.g. 12/768/12, BERT-base); "
                        "kerasbert only")
    parser.add_argument("--matmul_size", type=int, default=2048,
                        help="the reference matmul's size (8192 on a GPU)")
    parser.add_argument("--markdown", default=None, help="also write the table here")
    parser.add_argument("--json", default=None, help="also write the measurements here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not 0 <= args.padded_positions <= args.seq_length - 2:
        parser.error(f"--padded_positions={args.padded_positions}: must be 0 to "
                     f"--seq_length - 2 ({args.seq_length - 2}); a row keeps [CLS] and [SEP]")
    if args.worker == "kerasbert":
        return kerasbert_worker(args)
    if args.torch_python and missing_interpreter(args.torch_python):
        sys.exit(f"bench_training: {missing_interpreter(args.torch_python)}")

    if args.model_size:
        from kerasbert.model.encoders import default_vocab

        if args.torch_python:
            sys.exit("bench_training: --model_size has random weights; the PyTorch side "
                     "needs --checkpoint")
        with open(default_vocab(), encoding="utf-8") as f:
            config = shape_of(args.model_size, sum(1 for line in f if line.strip()))
    else:
        if args.checkpoint is None:
            from kerasbert.model.encoders import default_checkpoint

            args.checkpoint = default_checkpoint()
            if args.checkpoint is None:
                sys.exit("bench_training: no --checkpoint and the MiniLM-L6 package is not "
                         "installed")
        with open(os.path.join(args.checkpoint, "config.json")) as f:
            config = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "batch.npz")
        make_batch(data, config["vocab_size"], config["hidden_size"], args.batch_size,
                   args.seq_length, padded_positions=args.padded_positions)
        passed = [f"--{name}={getattr(args, name)}" for name in
                  ("steps", "warmup", "mixed_precision", "gradient_accumulation_steps",
                   "matmul_size")]
        passed += [f"--model_size={args.model_size}"] if args.model_size else [
            f"--checkpoint={args.checkpoint}"]
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = sorted(set(variants) - {"plain", "xla", "norms"})
        if unknown or not variants:
            sys.exit(f"bench_training: --variants={args.variants}: use plain, xla, norms")
        rounds = {}
        for _ in range(args.rounds):
            for variant in variants:
                rounds.setdefault(variant, []).append(run_side(
                    module_command(sys.executable, "bench_training", "--worker=kerasbert",
                                   f"--data={data}", *passed,
                                   *(["--jit_compile"] if variant == "xla" else []),
                                   *(["--grad_norms"] if variant == "norms" else [])),
                    "kerasbert"))
            if args.torch_python:
                rounds.setdefault("pytorch", []).append(run_side(
                    module_command(args.torch_python, "bench_training_torch", data,
                                   args.checkpoint, args.steps, args.warmup), "PyTorch"))
        if not args.torch_python:
            print("bench_training: no --torch_python: the PyTorch reference is skipped")
    sides = {label: merge_rounds(reports) for label, reports in rounds.items()}
    text = (f"{config['num_hidden_layers']}-layer BERT, hidden {config['hidden_size']}, batch "
            f"{args.batch_size} × seq {args.seq_length}"
            + (f" (every other row {args.padded_positions} [PAD]s)" if args.padded_positions
               else "") + ", full fine-tuning step; median of "
            f"{args.rounds} round(s) × {args.steps} steps after {args.warmup} warm-up; "
            f"{os.cpu_count()} CPUs visible\n\n"
            + table(sides, model_flops_per_step(config, args.batch_size, args.seq_length),
                    args.batch_size, args.seq_length))
    for r in sides.values():
        text += (f"\n{r['framework']}: first losses {', '.join(f'{x:.4f}' for x in r['losses'][:3])}"
                 f"; step times {', '.join(f'{x:.2f}' for x in r['step_times'])} s")
    print(text)
    if args.markdown:
        from kerasbert.io_utils import atomic_write_text

        atomic_write_text(args.markdown, text + "\n")
    if args.json:
        from kerasbert.io_utils import atomic_write_json

        flops = model_flops_per_step(config, args.batch_size, args.seq_length)
        atomic_write_json(args.json, {
            "shape": config, "batch_size": args.batch_size, "seq_length": args.seq_length,
            "mixed_precision": args.mixed_precision, "model_flops_per_step": flops,
            "sides": {label: {**r, "median_step_seconds": _median(r["step_times"]),
                              "model_flops_per_second": flops / _median(r["step_times"])}
                      for label, r in sides.items()}})


if __name__ == "__main__":
    main()
