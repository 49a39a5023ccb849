"""Pre-trains a BERT encoder: `python -m kerasbert.pretrain`.

    python -m kerasbert.pretraining.create_data --input_file=corpus.txt --output_dir=data
    python -m kerasbert.pretrain --input_file='data/train-*' --objective=bert \
        --model_size=tiny --num_train_steps=10000 --output_dir=pretrained
    python -m kerasbert.main --task=sst2 --init_checkpoint=pretrained ...

Objectives (BERT section 5.1): bert (MLM + NSP), no_nsp (MLM only), ltr (left-to-right LM
with a causal encoder, which stays causal when fine-tuned or exported). Flag names follow
google-research/bert's run_pretraining.py. See kerasbert/pretraining/train.py.
"""

from absl import flags

from kerasbert import distribute  # noqa: F401  (fails early if TF is broken)
from kerasbert.errors import InputError
from kerasbert.pretraining.cli import run
from kerasbert.pretraining.train import PretrainConfig, run_pretraining

FLAGS = flags.FLAGS
_D = PretrainConfig(input_file="", output_dir="")

flags.DEFINE_string("input_file", None, "Comma-separated globs of training shards written by "
                    "kerasbert.pretraining.create_data.")
flags.DEFINE_string("eval_input_file", None, "Held-out shards; default: heldout.tfrecord "
                    "beside the training shards.")
flags.DEFINE_string("output_dir", None, "Where encoder/, metrics.json and history.csv go.")
flags.DEFINE_enum("objective", _D.objective, ["bert", "no_nsp", "ltr"], "bert: MLM + NSP; "
                  "no_nsp: MLM only; ltr: left-to-right LM (causal encoder), no NSP.")
flags.DEFINE_string("init_checkpoint", None, "Continue from this encoder (any folder "
                    "kerasbert.main accepts; a pre-training output of the same --objective "
                    "continues its LM/NSP layers too); default: random at --model_size.")
flags.DEFINE_string("model_size", _D.model_size, "tiny, mini, small, medium, base, large or "
                    "L/H/A.")
flags.DEFINE_string("vocab_file", None, "Default: the vocabulary the data was made with.")
flags.DEFINE_integer("train_batch_size", _D.train_batch_size, "Global batch size.")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Held-out batch size.")
flags.DEFINE_integer("num_train_steps", _D.num_train_steps, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", _D.num_warmup_steps, "Linear warmup steps.")
flags.DEFINE_float("learning_rate", _D.learning_rate, "Peak learning rate of AdamW.")
flags.DEFINE_float("weight_decay", _D.weight_decay, "AdamW weight decay.")
flags.DEFINE_integer("max_eval_steps", _D.max_eval_steps, "Held-out batches to evaluate "
                     "(0 = none).")
flags.DEFINE_float("dropout", _D.dropout, "Encoder dropout.")
flags.DEFINE_integer("seed", _D.seed, "Random seed.")
flags.DEFINE_integer("log_every", _D.log_every, "Write the training loss to history.csv "
                     "every N steps.")
flags.DEFINE_enum("distribution_strategy", _D.distribution_strategy,
                  ["one_device", "mirrored"], "The tf.distribute strategy.")
flags.DEFINE_enum("mixed_precision", None, ["bfloat16"], "Compute in bfloat16 with float32 "
                  "weights (GPUs from Ampere on, TPUs).")
flags.DEFINE_list("snapshot_steps", [], "Also write the encoder after these steps, e.g. "
                  "4000,8000, to <output_dir>/step-<N>/ (each an --init_checkpoint).")
flags.DEFINE_boolean("jit_compile", _D.jit_compile, "Compile the training step with XLA.")
flags.DEFINE_boolean("verbose", False, "Full tracebacks for input errors.")


def main():
    for name in ("input_file", "output_dir"):
        if not FLAGS[name].value:
            raise InputError(f"--{name}: required")
    names = [f for f in PretrainConfig.__dataclass_fields__ if f in FLAGS]
    values = {n: FLAGS[n].value for n in names}
    try:
        values["snapshot_steps"] = tuple(int(s) for s in FLAGS.snapshot_steps)
    except ValueError:
        raise InputError(f"--snapshot_steps={','.join(FLAGS.snapshot_steps)}: expected "
                         "whole numbers, e.g. 4000,8000") from None
    config = PretrainConfig(**values)
    metrics = run_pretraining(config)
    print("pretrain: " + ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in sorted(metrics.items())))
    print(f"pretrain: encoder in {config.output_dir}/encoder "
          f"(--init_checkpoint={config.output_dir})")
    return 0


if __name__ == "__main__":
    run(main, "pretrain")
