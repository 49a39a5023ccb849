"""Where a training step spends its time: benchmarks/bench_training.py's step under
TensorFlow's profiler, read back into tables.

    python -m benchmarks.profile_step --seq_length=128 --steps=3 --output_dir=runs/profile-128

Builds the step bench_training times (same weights, batch, optimizer and Trainer; here in
this process), runs --warmup steps, then --steps steps under `tf.profiler`, and reads the
trace back (the XSpace protobuf TensorFlow writes):
- the step's wall time; the time some TensorFlow op was running (the union of all ops'
  intervals over every thread); the rest, host gaps (Python, dispatch, waiting for input);
- by op type (`_MklMatMul`, `_MklEinsum`, `Softmax`, ... as the kernels TensorFlow chose):
  self time per step, its share of the step, calls per step;
- by part: forward / backward / update × embeddings, attention, feed-forward, layer norm,
  head and loss, from each op's name scope.
An op's self time is its wall time on its thread minus the ops nested in it (a function
call's body); ops run side by side on the inter-op threads, so self times can add up to
more than the busy time. Under --jit_compile the step is one XLA cluster, which shows as
one op. Writes profile.md, profile.json and the trace (TensorBoard's profile plugin reads
it) to --output_dir.
"""

import argparse
import collections
import glob
import json
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks import bench_training

PARTS = (("layer_norm", "layer norm"), ("self_attention", "attention"),
         ("feedforward", "feed-forward"), ("embedding", "embeddings"))


def classify(op_name):
    """(phase, part) of an op from its name scope: phase forward / backward / update /
    other; part embeddings / attention / feed-forward / layer norm / head and loss, or "–"
    outside the model."""
    if op_name.startswith("fused_adam_w/") or "global_norm" in op_name:
        return "update", "–"  # AdamW's kernels, and the gradient clipping before them
    if op_name.startswith("gradient_tape/"):
        phase = "backward"
    elif op_name.startswith("task_model"):
        phase = "forward"
    else:
        return "other", "–"
    return phase, next((label for key, label in PARTS if key in op_name), "head and loss")


def op_events(space):
    """Every TensorFlow op the trace holds, as (thread, op name, op type, start ps, end ps).
    TensorFlow names an op event "<name>:<type>" with the type as its display name; the
    executor's own events (ExecutorState::Process, Iterator::...) are not ops. Ops of the
    input pipeline (threads tf_data*) are left out: they are the input's, not the step's."""
    out = []
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            if line.name.startswith("tf_data"):
                continue
            base = line.timestamp_ns * 1000
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                kind = meta.display_name
                if not kind or "::" in meta.name or not meta.name.endswith(":" + kind):
                    continue
                start = base + event.offset_ps
                out.append((line.id, meta.name[:-len(kind) - 1], kind, start,
                            start + event.duration_ps))
    return out


def self_times(events):
    """Each event's duration minus the events nested in it on the same thread: a list of
    (op name, op type, self ps) in the order given."""
    by_thread = collections.defaultdict(list)
    for i, (thread, _, _, start, end) in enumerate(events):
        by_thread[thread].append((start, -end, i))
    own = [end - start for _, _, _, start, end in events]
    for items in by_thread.values():
        stack = []  # the enclosing events of the one at hand: (end, index)
        for start, neg_end, i in sorted(items):
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack:
                own[stack[-1][1]] -= -neg_end - start
            stack.append((-neg_end, i))
    return [(name, kind, ps) for (_, name, kind, _, _), ps in zip(events, own)]


def busy_ps(events):
    """The length of the union of the events' intervals (over all threads)."""
    total, reach = 0, None
    for _, _, _, start, end in sorted(events, key=lambda e: e[3]):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def summarize(space, wall_seconds, steps, top=15):
    """The profile's tables as a dict: per-step wall, busy and gap seconds; the top op
    types and every (phase, part) by self seconds per step."""
    events = op_events(space)
    if not events:
        raise ValueError("the trace holds no TensorFlow op events")
    by_type, by_part = collections.Counter(), collections.Counter()
    calls = collections.Counter()
    for name, kind, ps in self_times(events):
        by_type[kind] += ps
        calls[kind] += 1
        by_part[classify(name)] += ps
    step = wall_seconds / steps
    busy = busy_ps(events) / 1e12 / steps

    def row(seconds):
        return {"seconds": seconds, "share": seconds / step}

    return {
        "steps": steps, "step_seconds": step, "busy_seconds": busy,
        "gap_seconds": max(step - busy, 0.0),
        "op_seconds": sum(by_type.values()) / 1e12 / steps,
        "op_types": [{"type": kind, "calls": calls[kind] / steps,
                      **row(ps / 1e12 / steps)} for kind, ps in by_type.most_common(top)],
        "parts": [{"phase": phase, "part": part, **row(ps / 1e12 / steps)}
                  for (phase, part), ps in by_part.most_common()],
    }


def markdown(summary, title):
    s = summary
    lines = [f"## {title}", "",
             (f"Per step (mean of {s['steps']}): wall {s['step_seconds']:.3f} s; some op running "
             f"{s['busy_seconds']:.3f} s ({100 * s['busy_seconds'] / s['step_seconds']:.0f}%); "
             f"host gaps {s['gap_seconds']:.3f} s; op self times add up to "
             f"{s['op_seconds']:.3f} s (ops overlap on the inter-op threads)."), "",
             "| op type | self s per step | % of the step | calls per step |", "|---|---|---|---|"]
    lines += [f"| `{r['type']}` | {r['seconds']:.3f} | {100 * r['share']:.1f} | "
              f"{r['calls']:.0f} |" for r in s["op_types"]]
    lines += ["", "| phase | part | self s per step | % of the step |", "|---|---|---|---|"]
    lines += [f"| {r['phase']} | {r['part']} | {r['seconds']:.3f} | {100 * r['share']:.1f} |"
              for r in s["parts"]]
    return "\n".join(lines) + "\n"


def read_space(trace_dir):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True))
    if not paths:
        raise ValueError(f"{trace_dir}: no *.xplane.pb trace written")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    return space


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=None, help="a HuggingFace BERT folder; "
                        "default: the installed MiniLM-L6")
    parser.add_argument("--model_size", default=None, help="L/H/A: random weights of this "
                        "shape instead of --checkpoint")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps")
    parser.add_argument("--warmup", type=int, default=2, help="steps before the profile "
                        "(tracing, first-call optimisation)")
    parser.add_argument("--jit_compile", action="store_true")
    parser.add_argument("--mixed_precision", default="none",
                        choices=["none", "mixed_float16", "mixed_bfloat16"])
    parser.add_argument("--top", type=int, default=15, help="op types listed")
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args()
    args.gradient_accumulation_steps = 1
    for name in ("batch_size", "seq_length", "steps", "top"):
        if getattr(args, name) < 1:
            sys.exit(f"profile_step: error: --{name}={getattr(args, name)}: must be ≥ 1")
    if args.warmup < 1:
        sys.exit(f"profile_step: error: --warmup={args.warmup}: must be ≥ 1 (the first "
                 "step traces the function; it is not the step's cost)")
    if args.model_size is None and args.checkpoint is None:
        from kerasbert.model.encoders import default_checkpoint

        args.checkpoint = default_checkpoint()
        if args.checkpoint is None:
            sys.exit("profile_step: error: no --checkpoint and the MiniLM-L6 package is not "
                     "installed")
    if args.model_size:
        from kerasbert.model.encoders import default_vocab

        with open(default_vocab(), encoding="utf-8") as f:
            config = bench_training.shape_of(args.model_size,
                                             sum(1 for line in f if line.strip()))
    else:
        with open(os.path.join(args.checkpoint, "config.json")) as f:
            config = json.load(f)

    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "batch.npz")
        bench_training.make_batch(data, config["vocab_size"], config["hidden_size"],
                                  args.batch_size, args.seq_length)
        _, trainer, dataset, _ = bench_training.build_step(args, np.load(data))
    trainer.train_epoch(dataset, args.warmup, show_progress=False)
    trace_dir = os.path.join(args.output_dir, "trace")
    tf.profiler.experimental.start(trace_dir)
    started = time.perf_counter()
    trainer.train_epoch(dataset, args.steps, show_progress=False)
    wall = time.perf_counter() - started
    tf.profiler.experimental.stop()

    summary = summarize(read_space(trace_dir), wall, args.steps, args.top)
    summary["command"] = " ".join(["python", "benchmarks/profile_step.py", *sys.argv[1:]])
    summary["shape"] = {k: config[k] for k in ("num_hidden_layers", "hidden_size")}
    title = (f"{config['num_hidden_layers']}-layer BERT, hidden {config['hidden_size']}, batch "
             f"{args.batch_size} × seq {args.seq_length}, "
             f"{'XLA' if args.jit_compile else 'plain'} step, TF {tf.__version__}")
    text = markdown(summary, title)
    from kerasbert.io_utils import atomic_write_json, atomic_write_text

    atomic_write_text(os.path.join(args.output_dir, "profile.md"), text)
    atomic_write_json(os.path.join(args.output_dir, "profile.json"), summary)
    print(text)


if __name__ == "__main__":
    main()
