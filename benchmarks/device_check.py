"""The GPU check: one command that measures and verifies kerasbert on one GPU machine.

    benchmarks/device_check.sh                  # on a GPU machine, ~8 minutes
    benchmarks/device_check.sh --smoke          # the same checks on the CPU with a tiny model (CI)

Checks, each a row of `<output_dir>/device_check.md` and `device_check.json`:

1. the training step with `--mixed_precision=mixed_bfloat16 --jit_compile`
   (benchmarks/bench_training.py, random weights) for the MiniLM-L6 and BERT-base shapes at 128
   and 512 tokens: tokens/s and model FLOP utilisation against the GPU's bf16 peak
   (--peak_tflops, default by the GPU's name) and against a bf16 matmul measured in the same
   process;
2. `--mixed_precision=mixed_float16` (dynamic loss scaling) trains to a finite loss;
3. `--distribution_strategy=mirrored` on all local GPUs (the replicas it used);
4. two `--deterministic` runs with one seed give bit-identical weights;
5. an export made on the GPU, served on the CPU in a fresh process that imports only
   tensorflow and tensorflow_text, answers as the same export served on the GPU.

A check that fails is recorded as failed and the others still run; the exit status is 1 if
any failed. Without a GPU (and without --smoke) it stops at once, exit 2.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

from benchmarks.processes import CHECKOUT, child_env

# Dense bf16 tensor-core peaks (TFLOP/s, SXM parts, no sparsity), by a word of the GPU's name.
BF16_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}
SENTENCES = ["a gripping , funny and moving film .", "the plot is a mess and the acting worse .",
             "", "an utterly forgettable two hours ."]


def plan(smoke):
    """What each check runs: the shapes and lengths of the step benchmark, the batch and
    timed steps, the model of the short training runs."""
    if smoke:
        return {"shapes": [("tiny 2/32/2", "2/32/2", 16), ("tiny 2/32/2", "2/32/2", 32)],
                "batch_size": 4, "steps": 2, "warmup": 1, "matmul_size": 256,
                "run_model": "2/32/2", "train_examples": 32}
    return {"shapes": [("MiniLM-L6 6/384/12", "6/384/12", 128),
                       ("MiniLM-L6 6/384/12", "6/384/12", 512),
                       ("BERT-base 12/768/12", "12/768/12", 128),
                       ("BERT-base 12/768/12", "12/768/12", 512)],
            "batch_size": 32, "steps": 10, "warmup": 3, "matmul_size": 8192,
            "run_model": "6/384/12", "train_examples": 512}


def _python(args, env=None, timeout=900):
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                            cwd=CHECKOUT, env=child_env(env), timeout=timeout,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} ... exit {result.returncode}: "
                           + result.stderr.strip()[-1500:])
    return result.stdout


def step_benchmark(p, out, peak_tflops):
    rows = []
    for name, size, length in p["shapes"]:
        path = os.path.join(out, f"step-{size.replace('/', '-')}-{length}.json")
        _python(["-m", "benchmarks.bench_training", f"--model_size={size}",
                 f"--seq_length={length}", f"--batch_size={p['batch_size']}",
                 f"--steps={p['steps']}",
                 f"--warmup={p['warmup']}", "--variants=xla",
                 "--mixed_precision=mixed_bfloat16", f"--matmul_size={p['matmul_size']}",
                 f"--json={path}"])
        with open(path) as f:
            measured = json.load(f)
        side = measured["sides"]["xla"]
        step, achieved = side["median_step_seconds"], side["model_flops_per_second"]
        tokens = p["batch_size"] * length / step
        of_peak = (f", {100 * achieved / (peak_tflops * 1e12):.1f}% of the {peak_tflops:g} "
                   "TFLOP/s bf16 peak" if peak_tflops else "")
        rows.append({
            "check": "training step, mixed_bfloat16 + XLA",
            "setting": f"{name}, batch {p['batch_size']} × {length}",
            "ok": True, "tokens_per_second": tokens, "step_seconds": step,
            "model_tflops": achieved / 1e12, "matmul_tflops": side["matmul_flops"] / 1e12,
            "matmul_dtype": side["matmul_dtype"], "device": side["device"],
            "result": f"{tokens:,.0f} tokens/s ({step * 1e3:.1f} ms/step); model "
                      f"{achieved / 1e12:.2f} TFLOP/s = {100 * achieved / side['matmul_flops']:.0f}"
                      f"% of a {side['matmul_dtype']} {p['matmul_size']}² matmul "
                      f"({side['matmul_flops'] / 1e12:.2f} TFLOP/s){of_peak}"})
    return rows


def _train(p, out, name, *flags):
    """A short sst2 run on the bundled sample with random weights; its stdout."""
    folder = os.path.join(out, name)
    stdout = _python(["-m", "kerasbert.main", "--task=sst2", "--init_checkpoint=random",
                      f"--model_size={p['run_model']}", "--max_seq_length=64",
                      f"--max_train_examples={p['train_examples']}", "--max_eval_examples=32",
                      "--train_batch_size=16", "--num_train_epochs=1", "--learning_rate=1e-4",
                      f"--output_dir={folder}", "--overwrite_output_dir", *flags])
    return folder, stdout


def mixed_float16(p, out):
    import math

    folder, _ = _train(p, out, "mixed_float16", "--mixed_precision=mixed_float16")
    from kerasbert import run_folder

    loss = float(run_folder.read_run_history(folder)[-1]["train_loss"])
    return [{"check": "mixed_float16 with dynamic loss scaling", "setting": p["run_model"],
             "ok": math.isfinite(loss), "train_loss": loss,
             "result": f"final train loss {loss:.4f}" + ("" if math.isfinite(loss)
                                                         else " (not finite)")}]


def mirrored(p, out, gpus):
    _, stdout = _train(p, out, "mirrored", "--distribution_strategy=mirrored")
    found = re.search(r"global batch (\d+) = (\d+) replica", stdout)
    replicas = int(found.group(2)) if found else None
    want = max(gpus, 1)
    return [{"check": "distribution_strategy=mirrored", "setting": f"{want} local device(s)",
             "ok": replicas == want, "replicas": replicas,
             "result": f"trained on {replicas} replica(s)"
                       + ("" if replicas == want else f", expected {want}")}]


def _weights(folder):
    import h5py
    import numpy as np

    arrays = {}
    with h5py.File(os.path.join(folder, "model.weights.h5"), "r") as f:
        f.visititems(lambda name, item: arrays.__setitem__(name, np.asarray(item))
                     if isinstance(item, h5py.Dataset) else None)
    return arrays


def deterministic_and_export(p, out):
    import numpy as np

    first, _ = _train(p, out, "deterministic-a", "--deterministic", "--seed=3",
                      f"--export_dir={os.path.join(out, 'export')}")
    second, _ = _train(p, out, "deterministic-b", "--deterministic", "--seed=3")
    a, b = _weights(first), _weights(second)
    differing = [k for k in a if k not in b or not np.array_equal(a[k], b[k])]
    rows = [{"check": "two --deterministic runs, one seed", "setting": p["run_model"],
             "ok": not differing and a.keys() == b.keys(), "arrays": len(a),
             "result": f"{len(a) - len(differing)} of {len(a)} weight arrays bit-identical"}]
    version = os.path.join(out, "export", "1")
    served = {}
    for where, env in (("gpu", {}), ("cpu", {"CUDA_VISIBLE_DEVICES": "-1"})):
        served[where] = json.loads(_python(["-c", SERVE, version, json.dumps(SENTENCES)],
                                           env=env).strip().splitlines()[-1])
    gap = float(np.max(np.abs(np.asarray(served["gpu"]["probabilities"])
                              - np.asarray(served["cpu"]["probabilities"]))))
    same = served["gpu"]["label"] == served["cpu"]["label"]
    rows.append({"check": "export on this machine, served on the CPU",
                 "setting": f"{len(SENTENCES)} sentences, fresh processes",
                 "ok": same and gap <= 1e-4, "max_probability_gap": gap,
                 "devices": {k: v["devices"] for k, v in served.items()},
                 "result": f"labels {'equal' if same else 'DIFFER'}; max |Δ probability| "
                           f"{gap:.2e} (served on {served['gpu']['devices']} vs "
                           f"{served['cpu']['devices']})"})
    return rows


# A fresh serving process: only tensorflow and tensorflow_text, as TF Serving would load it.
SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
model = tf.saved_model.load(sys.argv[1])
out = model.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
devices = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(),
                  "label": [x.decode() for x in out["label"].numpy()], "devices": devices}))
"""


def markdown(report):
    lines = [f"kerasbert device check ({'smoke, CPU' if report['smoke'] else 'GPU'}): "
             f"{report['environment']}, {report['seconds']:.0f} s", "",
             "| check | setting | ok | result |", "|---|---|---|---|"]
    for r in report["checks"]:
        lines.append(f"| {r['check']} | {r['setting']} | {'yes' if r['ok'] else 'NO'} | "
                     f"{r['result']} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="run every check on the CPU with a tiny model (CI)")
    parser.add_argument("--output_dir", default="runs/device_check")
    parser.add_argument("--peak_tflops", type=float, default=None,
                        help="the GPU's dense bf16 peak (default: by its name, if known)")
    args = parser.parse_args()
    started = time.time()
    try:
        import tensorflow as tf
    except ImportError as e:
        sys.exit(f"device_check: TensorFlow does not import here ({e}); install kerasbert "
                 "with its dependencies first (README, Quick start)")
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and not args.smoke:
        print("device_check: no GPU visible to TensorFlow "
              "(tf.config.list_physical_devices('GPU') is empty); --smoke runs on the CPU",
              file=sys.stderr)
        return 2
    names = [tf.config.experimental.get_device_details(g).get("device_name", "GPU")
             for g in gpus]
    peak = args.peak_tflops or next(
        (v for k, v in BF16_PEAK_TFLOPS.items() if names and k in names[0]), None)
    out = os.path.abspath(args.output_dir)
    os.makedirs(out, exist_ok=True)
    p = plan(args.smoke)
    checks = []
    steps = [("step benchmark", lambda: step_benchmark(p, out, peak)),
             ("mixed_float16", lambda: mixed_float16(p, out)),
             ("mirrored", lambda: mirrored(p, out, len(gpus))),
             ("determinism and export", lambda: deterministic_and_export(p, out))]
    for name, check in steps:
        try:
            checks += check()
        except Exception as e:  # one broken check must not hide the others' results
            checks.append({"check": name, "setting": "", "ok": False,
                           "result": f"failed: {str(e).splitlines()[-1] if str(e) else e!r}",
                           "error": str(e)})
        print(f"device_check: {name} done ({time.time() - started:.0f} s)", flush=True)
    report = {"smoke": args.smoke, "environment": f"TF {tf.__version__}, "
              + (", ".join(names) if names else f"CPU only ({os.cpu_count()} cores)"),
              "gpus": names, "bf16_peak_tflops": peak, "seconds": time.time() - started,
              "checks": checks}
    from kerasbert.io_utils import atomic_write_json, atomic_write_text

    atomic_write_json(os.path.join(out, "device_check.json"), report)
    text = markdown(report)
    atomic_write_text(os.path.join(out, "device_check.md"), text)
    sys.stdout.write(text)
    return 0 if all(r["ok"] for r in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
