"""A finished classification run exported both ways, predicting on raw text elsewhere.

    python -m benchmarks.check_checkpoint_export --run_dir=runs/sst2 --work_dir=/tmp/export-check \
        [--torch_python=<python with torch>] [--max_examples=64] [--data_dir=...]

Exports the run (kerasbert.export.checkpoint) as a keras-hub preset and as a HuggingFace
folder into --work_dir (new or empty), reads the run's dev examples, and compares the run's
own logits (kerasbert's tokenizer and model) with
  keras_hub.models.BertTextClassifier.from_preset(...).predict(texts)   (keras-hub's tokenizer)
  transformers BertTokenizer + BertForSequenceClassification             (in --torch_python)
on the raw text: the largest logit difference and how many predicted labels agree.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from benchmarks.processes import add_torch_python_flag, missing_interpreter
from kerasbert.errors import InputError, guarded
from kerasbert.export import checkpoint

TORCH_SIDE = r"""
import json, sys
import numpy as np, torch, transformers
spec = json.load(open(sys.argv[1]))
tokenizer = transformers.BertTokenizer.from_pretrained(spec["folder"])
model = transformers.BertForSequenceClassification.from_pretrained(spec["folder"]).eval()
pairs = [spec["texts_b"]] if spec["texts_b"] else []
encoded = tokenizer(spec["texts_a"], *pairs, padding=True, truncation="longest_first",
                    max_length=spec["max_seq_length"], return_tensors="pt")
with torch.no_grad():
    print(json.dumps(model(**encoded).logits.numpy().tolist()))
"""


def compare(name, theirs, ours):
    theirs = np.asarray(theirs, np.float64)
    same = int((theirs.argmax(-1) == ours.argmax(-1)).sum()) if ours.shape[-1] > 1 else None
    agreement = f", same label {same} / {len(ours)}" if same is not None else ""
    print(f"{name}: max |logit difference| {np.abs(theirs - ours).max():.2e}{agreement}")


@guarded
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--work_dir", required=True)
    add_torch_python_flag(parser, "the transformers side; without it that side is skipped")
    parser.add_argument("--max_examples", type=int, default=64)
    parser.add_argument("--data_dir", default=None,
                        help="The task's official files (default: the bundled sample).")
    args = parser.parse_args()
    if args.torch_python and missing_interpreter(args.torch_python):
        raise InputError(missing_interpreter(args.torch_python))
    kh, hf = (os.path.join(args.work_dir, n) for n in ("keras_hub", "huggingface"))
    for line in (checkpoint.export_checkpoint(args.run_dir, kh, "keras_hub")
                 + checkpoint.export_checkpoint(args.run_dir, hf, "huggingface")):
        print(f"exported: {line}")
    run = checkpoint.load_trained_run(args.run_dir)
    if not checkpoint.match_head(run).keras_hub_task:
        sys.exit("the run's head is not keras-hub's BertTextClassifier: nothing to compare")
    data_dir = args.data_dir or run.task.sample_dir()
    examples = run.task.read_examples(data_dir, run.task.dev_splits[0])[:args.max_examples]
    texts_a = [e.text_a for e in examples]
    texts_b = [e.text_b for e in examples] if examples[0].text_b is not None else None
    features = run.task.featurize(examples, run.tokenizer, run.config.max_seq_length)
    ours = np.asarray(run.model(features.inputs, training=False), np.float64)
    print(f"{len(examples)} {run.task.name} dev examples")

    import keras_hub

    classifier = keras_hub.models.BertTextClassifier.from_preset(kh)
    compare("keras-hub", classifier.predict((texts_a, texts_b) if texts_b else texts_a,
                                            verbose=0), ours)
    if args.torch_python:
        spec = os.path.join(args.work_dir, "torch_spec.json")
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"folder": hf, "texts_a": texts_a, "texts_b": texts_b,
                       "max_seq_length": run.config.max_seq_length}, f)
        result = subprocess.run([args.torch_python, "-c", TORCH_SIDE, spec],
                                capture_output=True, text=True, check=True)
        compare("transformers", json.loads(result.stdout.strip().splitlines()[-1]), ours)


if __name__ == "__main__":
    sys.exit(main())
