"""Where a fine-tuning's memory goes, phase by phase, kerasbert beside the HuggingFace
reference (issue #57: kerasbert's peak RSS was 650–850 MB above HF's on every parity task).

    python -m benchmarks.memory_phases --output_dir=runs/memory-phases \\
        [--task=mrpc --data_dir=../shared/data/glue/MRPC --max_train_examples=1000] \\
        [--torch_python=$KERASBERT_TORCH_PYTHON] [--no_tracemalloc] [--quick]

One run of one recipe on each side (benchmarks/parity.py's recipe and flags: the same
checkpoint, examples, batches, lr; default one epoch of MRPC's bundled sample at length 128),
each in its own process (benchmarks/phase_probe.py), which reads its memory at the end of
every phase: the interpreter, the imports, the encoder loaded, the data featurized, the
first (traced) training step, training, evaluation, checkpoints and the final files.
Per phase: RSS at its end, the peak within it (VmHWM, reset at every mark), the anonymous
and file-backed parts of the RSS, and (tracemalloc, on unless --no_tracemalloc, on both
sides) the Python heap and its peak; a kerasbert − HF column for the RSS at the end of
the phases both sides have. --quick: 64 training and 32 dev examples at length 32, for
tests (give a tiny --init_checkpoint).

Writes <output_dir>/memory_phases.json and memory_phases.md (also printed).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

from benchmarks import parity
from benchmarks.processes import add_torch_python_flag, child_env, module_command
from kerasbert.errors import guarded
from kerasbert.io_utils import atomic_write_json, atomic_write_text

SIDES = ("kerasbert", "huggingface")
NAMES = {"kerasbert": "kerasbert", "huggingface": "HF"}
# Phases both sides have, in kerasbert's order (HF featurizes before it loads the model).
COMMON = ("interpreter", "encoder loaded", "data featurized", "first step (traced)",
          "training", "evaluation")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", required=True)
    p.add_argument("--task", default="mrpc")
    p.add_argument("--data_dir", default=None, help="default: kerasbert's bundled sample")
    p.add_argument("--init_checkpoint", default=None, help="a HuggingFace BERT folder; "
                   "default: MiniLM-L6")
    p.add_argument("--max_train_examples", type=int, default=None)
    p.add_argument("--max_eval_examples", type=int, default=None)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--num_train_epochs", type=float, default=1)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--train_batch_size", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no_tracemalloc", action="store_true",
                   help="no Python-heap columns (tracemalloc's bookkeeping is then not in "
                   "the RSS either)")
    p.add_argument("--quick", action="store_true",
                   help="64 training and 32 dev examples at length 32 (tests)")
    add_torch_python_flag(p, "the HuggingFace side; without it that side is skipped")
    args = p.parse_args(argv)
    if args.quick:
        args.max_train_examples = args.max_train_examples or 64
        args.max_eval_examples = args.max_eval_examples or 32
        args.max_seq_length = 32
    recipe = ["--task", args.task, "--output_dir", args.output_dir, "--seeds", str(args.seed),
              "--max_seq_length", str(args.max_seq_length),
              "--num_train_epochs", str(args.num_train_epochs),
              "--learning_rate", str(args.learning_rate),
              "--train_batch_size", str(args.train_batch_size)]
    for name in ("data_dir", "init_checkpoint", "max_train_examples", "max_eval_examples",
                 "torch_python"):
        if getattr(args, name) is not None:
            recipe += [f"--{name}", str(getattr(args, name))]
    recipe_args = parity.parse_args(recipe)
    task = parity.check_args(recipe_args)  # every flag and file, as parity checks them
    return args, recipe_args, task


def run_side(args, recipe, task, side, files):
    folder = os.path.join(args.output_dir, side)
    os.makedirs(folder, exist_ok=True)
    spec = {"tracemalloc": not args.no_tracemalloc,
            "output_file": os.path.join(folder, "phases.json")}
    if side == "kerasbert":
        spec["flags"] = parity.kerasbert_flags(recipe, args.seed, os.path.join(folder, "run"))
        interpreter = sys.executable
    else:
        _, spec["hf_spec_file"] = parity.reference_spec(recipe, args.seed, folder, task, files)
        spec["eval_splits"] = len(task.dev_splits)
        interpreter = recipe.torch_python
    spec_file = os.path.join(folder, "probe.json")
    atomic_write_json(spec_file, spec)
    log = os.path.join(folder, "log.txt")
    print(f"memory_phases: {side}: running (log {log})", flush=True)
    command = module_command(interpreter, "phase_probe", side, spec_file)
    with open(log, "w", encoding="utf-8") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False,
                              env=child_env({"HF_HUB_OFFLINE": "1"})).returncode
    if code != 0:
        raise RuntimeError(f"the {side} side failed (exit {code}); see {log}")
    with open(spec["output_file"], encoding="utf-8") as f:
        return json.load(f)


def _mb(value):
    return "–" if value is None else f"{value:.0f}"


def side_table(result):
    """One side's phases in its own order."""
    heap = "python_heap_mb" in result["marks"][0]
    lines = [f"#### {result['framework']}", "",
             "| phase | s | RSS at end MB | + in phase MB | peak in phase MB | anon MB | "
             "file MB |" + (" Python heap MB | heap peak in phase MB |" if heap else ""),
             "|---|---|---|---|---|---|---|" + ("---|---|" if heap else "")]
    previous = 0.0
    for m in result["marks"]:
        row = (f"| {m['phase']} | {m['seconds']:.1f} | {_mb(m['rss_mb'])} | "
               f"{m['rss_mb'] - previous:+.0f} | {_mb(m['phase_peak_rss_mb'])} | "
               f"{_mb(m['anon_mb'])} | {_mb(m['file_mb'])} |")
        if heap:
            row += f" {m['python_heap_mb']:.0f} | {m['python_heap_peak_mb']:.0f} |"
        lines.append(row)
        previous = m["rss_mb"]
    peak = max(m["phase_peak_rss_mb"] for m in result["marks"])
    lines += ["", f"Peak RSS of the process: {peak:.0f} MB"
              + (f"; tracemalloc's own bookkeeping at the end "
                 f"{result['marks'][-1]['tracemalloc_mb']:.0f} MB (in the RSS)" if heap else "")]
    return lines


def comparison(results):
    """RSS at the end of each phase both sides have, and the difference."""
    by_side = {s: {m["phase"]: m for m in r["marks"]} for s, r in results.items()}
    kb, hf = by_side["kerasbert"], by_side["huggingface"]
    # kerasbert's imports are one phase here; HF's the torch and transformers imports
    lines = ["| after | kerasbert RSS MB | HF RSS MB | kerasbert − HF MB | "
             "kerasbert peak in phase | HF peak in phase |", "|---|---|---|---|---|---|"]
    rows = [("imports", kb["import kerasbert"], hf["import transformers"])]
    rows += [(p, kb.get(p), hf.get(p)) for p in COMMON[1:]]
    for name, a, b in rows:
        if a is None or b is None:
            continue
        lines.append(f"| {name} | {a['rss_mb']:.0f} | {b['rss_mb']:.0f} | "
                     f"{a['rss_mb'] - b['rss_mb']:+.0f} | {a['phase_peak_rss_mb']:.0f} | "
                     f"{b['phase_peak_rss_mb']:.0f} |")
    peaks = {s: max(m["phase_peak_rss_mb"] for m in r.values()) for s, r in by_side.items()}
    lines += ["", f"Process peak RSS: kerasbert {peaks['kerasbert']:.0f} MB, HF "
              f"{peaks['huggingface']:.0f} MB ({peaks['kerasbert'] - peaks['huggingface']:+.0f})"]
    return lines


def markdown(results, header):
    lines = [header, ""]
    if len(results) == 2:
        lines += comparison(results) + [""]
    for side in SIDES:
        if side in results:
            lines += side_table(results[side]) + [""]
    return "\n".join(lines)


@guarded
def main(argv=None):
    args, recipe, task = parse_args(argv)
    splits = parity.read_splits(task, recipe.data_dir, recipe.max_train_examples,
                                recipe.max_eval_examples)
    os.makedirs(args.output_dir, exist_ok=True)
    files = parity.write_reference_data(task, splits, os.path.join(args.output_dir, "data"))
    results = {}
    try:
        for side in SIDES:
            if side == "huggingface" and recipe.torch_python is None:
                print("memory_phases: no --torch_python: the HuggingFace side is skipped")
                continue
            results[side] = run_side(args, recipe, task, side, files)
    except RuntimeError as e:
        print(f"memory_phases: {e}", file=sys.stderr)
        return 1
    header = (f"### Memory by phase: {task.name}\n\n"
              f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} "
              f"CPUs. Data {recipe.data_dir}: "
              + ", ".join(f"{s} {len(e)}" for s, e in splits.items())
              + f"; lr {recipe.learning_rate:g}, batch {recipe.train_batch_size}, epochs "
              f"{recipe.num_train_epochs:g}, max_seq_length {recipe.max_seq_length}, seed "
              f"{args.seed}; tracemalloc {'off' if args.no_tracemalloc else 'on'}.\n\n"
              "    python -m benchmarks.memory_phases " + " ".join(
                  sys.argv[1:] if argv is None else argv))
    text = markdown(results, header)
    atomic_write_json(os.path.join(args.output_dir, "memory_phases.json"), results)
    atomic_write_text(os.path.join(args.output_dir, "memory_phases.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
