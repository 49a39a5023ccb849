"""Benchmark: serving a fine-tuned run, kerasbert's SavedModel vs a HuggingFace pipeline.

    python -m benchmarks.bench_serving --run_dirs=runs/sst2,runs/squad,runs/conll \
        --work_dir=/tmp/serving [--torch_python=<python with torch>] [--rounds=3]

For each finished run it writes the TF Serving export (kerasbert.export.saved_model) and,
with --torch_python, the HuggingFace folder (kerasbert.export.checkpoint) of the same
weights into --work_dir, reads the run's dev texts (its --predict_file or --data_dir, else
the bundled sample), and serves them from raw text in fresh processes, one after the other:

- kerasbert: a process that imports only TensorFlow and the export's tokenizer ops (as TF
  Serving loads an export; see --tf_servers) and calls the export's `serving_default`;
- HuggingFace: a transformers `pipeline` (text-classification; token-classification with
  first-sub-token words) on PyTorch in --torch_python; for SQuAD, whose pipeline
  transformers 5 removed, its fast tokenizer's overlapping windows (the run's
  max_seq_length, doc_stride as the overlap) and the best span of ≤ max_answer_length
  pieces over the windows, as HuggingFace's run_qa.py example decodes.

Each reports the seconds from its process start to the first answer (and to the end of
its imports and of loading the model), the latency of --requests single-text requests
(p50 and p99 in ms, after --warmup), the throughput of batches of --batch_size texts
(texts/s, median batch), and its peak RSS. With --rounds=N the sides alternate N times,
each round in the other order (latencies pooled, medians over rounds). Prints one Markdown
table and writes `serving.md` / `serving.json` (with the host: CPU model, ISA flags,
cores, load average before and after) to --work_dir.

--tf_servers=lean,plain serves the export both ways: `lean` imports only TensorFlow and
loads the three tokenizer op libraries (what TF Serving's model server has built in), with
Keras kept out of the process; `plain` imports tensorflow_text, as a Python user would by
default; `lean_no_grappler` is `lean` with Grappler's graph optimisations off
(tf.config.optimizer disable_meta_optimizer). --intra_op_threads / --inter_op_threads set
tf.config.threading in the server.
--baseline_work_dir=<an earlier bench's --work_dir> serves its exports as well (say, made
by another commit), alternating with the rest: before / after on one loaded machine.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.processes import add_torch_python_flag, missing_interpreter

# What both servers run once they define `call(batch)` and `framework`: the first answer
# (timed from the parent's clock at spawn, argv[2]), single requests, batches, and the
# process's own peak RSS (VmHWM starts afresh at exec; ru_maxrss would carry over the
# parent's peak, which here holds the exports).
MEASURE = r"""
texts = spec["inputs"]
call(texts[:1])
first = time.time() - spawned
for x in texts[:spec["warmup"]]:
    call([x])
latencies = []
for i in range(spec["requests"]):
    t = time.perf_counter(); call([texts[i % len(texts)]]); latencies.append(time.perf_counter() - t)
b = spec["batch_size"]
batches = [texts[i:i + b] for i in range(0, len(texts) - b + 1, b)][:spec["batches"]]
call(batches[0])
batch_times = []
for batch in batches:
    t = time.perf_counter(); call(batch); batch_times.append(time.perf_counter() - t)
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
print(json.dumps({"framework": framework, "first_answer_seconds": first,
                  "import_seconds": imported, "load_seconds": loaded,
                  "latencies": latencies, "batch_times": batch_times, "batch_size": b,
                  "peak_rss_mb": peak}))
"""

TF_SERVER = r"""
import json, os, sys, time
spawned = float(sys.argv[2])
spec = json.load(open(sys.argv[1]))
if spec["lean"]:
    # TensorFlow imports Keras 3 at `import tensorflow` when it is installed (for its
    # optimizers' SavedModel registrations): a serving process needs none of it.
    sys.modules["keras"] = None
import tensorflow as tf
if spec["lean"]:
    # The export's three tokenizer ops, without tensorflow_text's Python package (which
    # loads every op library it has and its Keras layers).
    import importlib.util
    ops = os.path.join(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0],
                       "python", "ops")
    for library in ("_normalize_ops.so", "_regex_split_ops.so", "_wordpiece_tokenizer.so"):
        tf.load_op_library(os.path.join(ops, library))
else:
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
if not spec["grappler"]:  # the first call then skips optimising each function's graph
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
if spec["intra_op_threads"] is not None:
    tf.config.threading.set_intra_op_parallelism_threads(spec["intra_op_threads"])
if spec["inter_op_threads"] is not None:
    tf.config.threading.set_inter_op_parallelism_threads(spec["inter_op_threads"])
imported = time.time() - spawned
serve = tf.saved_model.load(spec["export"]).signatures["serving_default"]
loaded = time.time() - spawned
framework = f"kerasbert SavedModel (TF {tf.__version__}, {spec['mode']})"
def call(batch):
    out = serve(**{k: tf.constant([x[k] for x in batch]) for k in batch[0]})
    return {k: v.numpy() for k, v in out.items()}
""" + MEASURE

# The LiteRT export (kerasbert/export/litert.py) in a process without TensorFlow.
LITE_SERVER = r"""
import json, sys, time
spawned = float(sys.argv[2])
spec = json.load(open(sys.argv[1]))
from importlib.metadata import version
from kerasbert.lite import LiteModel
import ai_edge_litert.interpreter  # noqa: F401  (imported here so that 'imported' counts it)
imported = time.time() - spawned
model = LiteModel(spec["lite_export"], num_threads=spec["intra_op_threads"] or None)
loaded = time.time() - spawned
framework = (f"kerasbert LiteRT{' int8' if model.serving.get('quantize') == 'dynamic_int8' else ''}"
             f" (ai-edge-litert {version('ai-edge-litert')})")
def call(batch):
    if "text" in batch[0]:  # tagging
        return model.serve([x["text"] for x in batch])
    if "question" in batch[0]:  # span
        return model.serve([x["question"] for x in batch], [x["context"] for x in batch])
    return model.serve([x["text_a"] for x in batch],
                         [x["text_b"] for x in batch] if "text_b" in batch[0] else None)
""" + MEASURE

# --tf_servers: how the kerasbert side's process loads TensorFlow and runs the export
# (litert: the LiteRT export instead, without TensorFlow; classification, tagging and span runs).
TF_SERVERS = {"lean": {"mode": "lean", "lean": True, "grappler": True},
              "lean_no_grappler": {"mode": "lean, no Grappler", "lean": True, "grappler": False},
              "plain": {"mode": "import tensorflow_text", "lean": False, "grappler": True},
              "litert": {"mode": "litert"}, "litert_int8": {"mode": "litert_int8"}}
LITE_MODES = {"litert": "none", "litert_int8": "dynamic_int8"}  # mode -> export's quantize

HF_SERVER = r"""
import json, sys, time
spawned = float(sys.argv[2])
import torch, transformers
imported = time.time() - spawned
spec = json.load(open(sys.argv[1]))
kind = spec["kind"]
framework = f"HF pipeline (torch {torch.__version__})"
if kind == "span":  # transformers 5 has no question-answering pipeline: windows by hand
    import numpy as np
    framework = f"HF tokenizer + model (torch {torch.__version__})"
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["hf_folder"])
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(spec["hf_folder"]).eval()
    def call(batch):
        enc = tokenizer([x["question"] for x in batch], [x["context"] for x in batch],
                        truncation="only_second", max_length=spec["max_seq_length"],
                        stride=spec["doc_stride"], return_overflowing_tokens=True,
                        return_offsets_mapping=True, padding=True, return_tensors="pt")
        owner, offsets = enc.pop("overflow_to_sample_mapping"), enc.pop("offset_mapping")
        with torch.inference_mode():  # as the pipelines run their models
            out = model(**enc)
        best = {}
        for w in range(len(owner)):
            context = np.array([sid == 1 for sid in enc.sequence_ids(w)])
            s = np.where(context, out.start_logits[w].numpy(), -np.inf)
            e = np.where(context, out.end_logits[w].numpy(), -np.inf)
            scores = s[:, None] + e[None, :]
            i, j = np.indices(scores.shape)
            scores[(j < i) | (j - i >= spec["max_answer_length"])] = -np.inf
            k = int(np.argmax(scores)); a, b = divmod(k, scores.shape[1])
            x = batch[int(owner[w])]
            if int(owner[w]) not in best or scores[a, b] > best[int(owner[w])][0]:
                best[int(owner[w])] = (scores[a, b],
                                       x["context"][int(offsets[w][a][0]):int(offsets[w][b][1])])
        return [best[i][1] for i in range(len(batch))]
else:
    task = {"classification": "text-classification", "tagging": "token-classification"}[kind]
    options = {"aggregation_strategy": "first"} if kind == "tagging" else {}
    pipe = transformers.pipeline(task, model=spec["hf_folder"], tokenizer=spec["hf_folder"],
                                 device=-1, **options)
    def call(batch):
        if kind == "classification":
            items = [{"text": x["text_a"], "text_pair": x["text_b"]} if "text_b" in x
                     else x["text_a"] for x in batch]
        else:
            items = [x["text"] for x in batch]
        return pipe(items, batch_size=len(items))
loaded = time.time() - spawned
""" + MEASURE


def serving_inputs(task, examples):
    """The export's `serving_default` inputs for each example (raw text, as a client sends)."""
    kind = task.kind
    if kind == "classification":
        return [{"text_a": e.text_a, **({"text_b": e.text_b} if e.text_b is not None else {})}
                for e in examples]
    if kind == "span":
        return [{"question": e.text_a, "context": e.text_b} for e in examples]
    if kind == "tagging":
        return [{"text": e.text_a} for e in examples]
    raise SystemExit(f"bench_serving: the {task.name} task ({kind}) is not benchmarked; "
                     "classification, span and tagging runs are")


def prepare(run_dir, work_dir, with_hf, max_texts, taken, lite=()):
    """Exports the run (and its HF folder; for each of `lite`'s LITE_MODES, its LiteRT
    export where the task's kind has one), reads its dev texts: the spec of one task."""
    from kerasbert import plugins, run_folder
    from kerasbert.export import checkpoint, saved_model

    config = run_folder.read_config(run_dir)
    task = plugins.registry().task(config["task"])
    name = task.name  # the table's row; a second run of one task adds its folder's name
    if name in taken:
        name = f"{task.name} ({os.path.basename(os.path.normpath(run_dir))})"
    taken.add(name)
    folder_name = name.replace(" (", "-").rstrip(")")
    folder = os.path.join(work_dir, folder_name)
    export = saved_model.export_run(run_dir, os.path.join(folder, "saved_model"))
    lite_exports = {}
    if lite:
        from kerasbert.export import litert
        from kerasbert.lite.model import KINDS

        if task.kind in KINDS:
            lite_exports = {mode: litert.export_run(run_dir, os.path.join(folder, mode),
                                                    quantize=LITE_MODES[mode])
                            for mode in lite}
    hf_folder = None
    if with_hf:
        hf_folder = os.path.join(folder, "huggingface")
        checkpoint.export_checkpoint(run_dir, hf_folder, "huggingface")
    split = task.dev_splits[0]
    examples = (task.read_file(config["predict_file"], split) if config.get("predict_file")
                else task.read_examples(config.get("data_dir") or task.sample_dir(), split))
    examples = examples[:max_texts]
    return {"name": name, "task": task.name, "kind": task.kind, "export": export,
            "max_seq_length": config["max_seq_length"],
            "doc_stride": config.get("doc_stride") or 128,
            "max_answer_length": config.get("max_answer_length") or 30,
            "hf_folder": hf_folder, "lite_exports": lite_exports,
            "inputs": serving_inputs(task, examples)}


def serve(interpreter, program, spec):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        spawned = time.time()
        result = subprocess.run([interpreter, "-c", program, f.name, repr(spawned)],
                                capture_output=True, text=True, check=False)
    finally:
        os.unlink(f.name)
    if result.returncode != 0:
        sys.exit(f"bench_serving: a server failed on {spec['name']}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def side_name(side, mode):
    """serving.json's key of a kerasbert row: the side alone for the default (lean) server."""
    return side if mode == "lean" else f"{side} {mode}"


def baseline_export(work_dir, spec):
    """The highest version of the same task's export in an earlier bench's --work_dir."""
    folder = os.path.join(work_dir, spec["name"].replace(" (", "-").rstrip(")"), "saved_model")
    versions = [int(v) for v in (os.listdir(folder) if os.path.isdir(folder) else [])
                if v.isdigit()]
    if not versions:
        sys.exit(f"bench_serving: --baseline_work_dir: no export of {spec['name']} in {folder}")
    return os.path.join(folder, str(max(versions)))


def host():
    """What the numbers were taken on: CPU model and vector ISA flags, cores, load."""
    import platform

    from kerasbert import host as host_cpu

    cpu = host_cpu.cpu()
    flags = sorted(cpu["flags"])
    return {"cpu_model": cpu["model"],
            "isa_flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4")))
            or flags,
            "cpus_visible": os.cpu_count(),
            "cpus_usable": host_cpu.usable_cores(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "platform": platform.platform(), "python": platform.python_version()}


def merge(reports):
    """One row per side: latencies and batch times pooled over rounds, first-answer time
    the median of the rounds, peak memory the maximum."""
    latencies = np.asarray([x for r in reports for x in r["latencies"]]) * 1e3
    batch = float(np.median([x for r in reports for x in r["batch_times"]]))
    return {"framework": reports[0]["framework"],
            "first_answer_seconds": float(np.median([r["first_answer_seconds"] for r in reports])),
            "import_seconds": float(np.median([r["import_seconds"] for r in reports])),
            "load_seconds": float(np.median([r["load_seconds"] for r in reports])),
            "p50_ms": float(np.percentile(latencies, 50)),
            "p99_ms": float(np.percentile(latencies, 99)),
            "texts_per_second": reports[0]["batch_size"] / batch,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in reports), "rounds": len(reports),
            "requests": int(latencies.size)}


def table(results, batch_size):
    lines = [f"| task | server | start → 1st answer s (imported, loaded) | batch 1 p50 ms | "
             f"p99 ms | batch {batch_size} texts/s | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for name, sides in results.items():
        for r in sides.values():
            lines.append(f"| {name} | {r['framework']} | {r['first_answer_seconds']:.1f} "
                         f"({r['import_seconds']:.1f}, {r['load_seconds']:.1f}) | "
                         f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['texts_per_second']:.1f} "
                         f"| {r['peak_rss_mb']:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run_dirs", required=True, help="finished runs, comma-separated")
    parser.add_argument("--work_dir", required=True, help="exports go here (new or empty)")
    add_torch_python_flag(parser, "the HuggingFace side")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max_texts", type=int, default=512, help="dev texts read per task")
    parser.add_argument("--tf_servers", default="lean",
                        help="how the kerasbert side loads, comma-separated, one row each: "
                        "lean (only TensorFlow and the three tokenizer op libraries, Keras "
                        "kept out), lean_no_grappler (the same, Grappler off), plain (import "
                        "tensorflow_text, as the docs' Python snippet), litert (the LiteRT "
                        "export in a process without TensorFlow; classification and tagging runs), "
                        "litert_int8 (the same with int8 weights)")
    parser.add_argument("--intra_op_threads", type=int, default=None,
                        help="tf.config.threading intra-op threads of the kerasbert side "
                        "(default: TensorFlow's, one per core)")
    parser.add_argument("--inter_op_threads", type=int, default=None,
                        help="tf.config.threading inter-op threads (default: TensorFlow's)")
    parser.add_argument("--baseline_work_dir", default=None,
                        help="the --work_dir of an earlier bench_serving run (e.g. of another "
                        "commit): its exports are served too, as a 'baseline' row, "
                        "alternating with the others")
    args = parser.parse_args()
    from kerasbert import run_folder

    runs = [r.strip() for r in args.run_dirs.split(",") if r.strip()]
    for run in runs:  # every refusal before anything is exported
        if not run_folder.is_finished(run):
            sys.exit(f"bench_serving: --run_dirs: {run} is not a finished run")
    if args.torch_python and missing_interpreter(args.torch_python):
        sys.exit(f"bench_serving: {missing_interpreter(args.torch_python)}")
    if os.path.exists(args.work_dir) and os.listdir(args.work_dir):
        sys.exit(f"bench_serving: --work_dir={args.work_dir} is not empty")
    for name, value in (("requests", args.requests), ("batch_size", args.batch_size),
                        ("batches", args.batches), ("rounds", args.rounds)):
        if value < 1:
            sys.exit(f"bench_serving: --{name}={value}: must be a positive integer")
    for name in ("intra_op_threads", "inter_op_threads"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            sys.exit(f"bench_serving: --{name}={getattr(args, name)}: must be 0 (TensorFlow "
                     "picks) or more")
    tf_servers = [x.strip() for x in args.tf_servers.split(",") if x.strip()]
    if not tf_servers or set(tf_servers) - set(TF_SERVERS):
        sys.exit(f"bench_serving: --tf_servers={args.tf_servers}: give one or more of "
                 f"{', '.join(TF_SERVERS)}")
    if args.baseline_work_dir and not os.path.isdir(args.baseline_work_dir):
        sys.exit(f"bench_serving: --baseline_work_dir={args.baseline_work_dir}: no such folder")
    taken = set()
    specs = [prepare(run, args.work_dir, bool(args.torch_python), args.max_texts, taken,
                     lite=[m for m in tf_servers if m in LITE_MODES]) for run in runs]
    for spec in specs:
        if len(spec["inputs"]) < args.batch_size:
            sys.exit(f"bench_serving: {spec['name']}: {len(spec['inputs'])} dev texts, fewer "
                     f"than --batch_size={args.batch_size}")
        spec.update(requests=args.requests, warmup=args.warmup, batch_size=args.batch_size,
                    batches=args.batches, intra_op_threads=args.intra_op_threads,
                    inter_op_threads=args.inter_op_threads)
    if not args.torch_python:
        print("bench_serving: no --torch_python: the HuggingFace side is skipped")
    host_before = host()
    rounds = {}
    for i in range(args.rounds):
        for spec in specs:
            sides = rounds.setdefault(spec["name"], {})
            saved_model_modes = [m for m in tf_servers if m not in LITE_MODES]
            jobs = [(side_name("kerasbert", mode), sys.executable, TF_SERVER,
                     {**spec, **TF_SERVERS[mode]}) for mode in saved_model_modes]
            jobs += [(side_name("kerasbert", mode), sys.executable, LITE_SERVER,
                      {**spec, "lite_export": path})
                     for mode, path in spec["lite_exports"].items()]
            if args.baseline_work_dir:
                jobs += [(side_name("baseline", mode), sys.executable, TF_SERVER,
                          {**spec, **TF_SERVERS[mode],
                           "export": baseline_export(args.baseline_work_dir, spec)})
                         for mode in saved_model_modes]
            if args.torch_python:
                jobs.append(("huggingface", args.torch_python, HF_SERVER, spec))
            # Each round in the other order: neither side always runs after the other.
            for side, interpreter, program, job in (jobs if i % 2 == 0 else jobs[::-1]):
                report = serve(interpreter, program, job)
                if side.startswith("baseline"):
                    report["framework"] = "baseline: " + report["framework"]
                sides.setdefault(side, []).append(report)
    results = {name: {side: merge(reports) for side, reports in sides.items()}
               for name, sides in rounds.items()}
    machine = {"before": host_before, "after": host()}
    text = (f"Serving from raw text on {machine['before']['cpu_model']} "
            f"({os.cpu_count()} CPUs visible, load average {machine['before']['load_average']} "
            f"before, {machine['after']['load_average']} after); {args.rounds} round(s) × "
            f"{args.requests} single-text requests (after {args.warmup}) and {args.batches} "
            f"batches of {args.batch_size}\n\n" + table(results, args.batch_size))
    from kerasbert.io_utils import atomic_write_json, atomic_write_text

    atomic_write_text(os.path.join(args.work_dir, "serving.md"), text)
    atomic_write_json(os.path.join(args.work_dir, "serving.json"),
                      {"runs": runs, "settings": vars(args), "host": machine,
                       "results": results})
    print(text)


if __name__ == "__main__":
    main()
