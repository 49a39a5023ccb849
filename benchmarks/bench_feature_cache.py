"""Benchmark: one training epoch of the feature_bilstm head, live encoder vs cached features.

The feature-based approach never trains the encoder, so its activations can be computed
once (`compute_layer_features`) and every epoch then trains the BiLSTM head alone. This
times both ways on CoNLL-format data (the bundled sample by default):

  live    each step runs the frozen encoder (inference) and trains the head on its layers
  cached  features computed once (reported as a one-off cost), each step trains the head only

Both use the same batches (in file order, each trimmed to its longest row, as kerasbert's
pipeline does) and traced steps; the first epoch of each is a warm-up (tracing) and is not
timed. Break-even: the number of epochs after which extraction + cached epochs beat live.

    python -m benchmarks.bench_feature_cache                       # MiniLM-L6 if installed, else tiny
    python -m benchmarks.bench_feature_cache --model_size=base --lstm_units=768 --data_dir=...
"""

import argparse
import os
import tempfile
import time

import numpy as np



def load(args):
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.model import encoders
    from kerasbert.tasks.conll import TASK

    folder = args.checkpoint or (None if args.model_size else encoders.default_checkpoint())
    if folder:
        encoder = encoders.load_encoder(folder)
        name = os.path.basename(os.path.dirname(folder.rstrip("/"))) or folder
    else:
        encoder = encoders.random_encoder(args.model_size or "tiny", seed=0)
        name = f"random {args.model_size or 'tiny'}"
    tokenizer = WordPieceTokenizer(encoder.vocab_file, encoder.do_lower_case)
    examples = TASK.read_examples(args.data_dir or TASK.sample_dir(), "train")[: args.limit]
    features = TASK.featurize(examples, tokenizer, args.max_seq_length)
    return encoder.backbone, name, features


def batches(features, batch_size):
    lengths = features.inputs["padding_mask"].sum(1)
    for start in range(0, len(lengths), batch_size):
        stop = start + batch_size
        yield slice(start, stop), max(int(lengths[start:stop].max()), 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="An encoder folder (default: MiniLM-L6 package).")
    parser.add_argument("--model_size", help="A random encoder of this size instead (tiny, base, L/H/A).")
    parser.add_argument("--data_dir", help="A CoNLL folder with train.txt (default: bundled sample).")
    parser.add_argument("--limit", type=int, default=None, help="Use the first N sentences.")
    parser.add_argument("--layers", default="concat_last_four")
    parser.add_argument("--lstm_units", type=int, default=128)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2, help="Timed epochs after the warm-up.")
    args = parser.parse_args(argv)

    import keras
    import tensorflow as tf

    from kerasbert.heads.feature_bilstm import FeatureBiLSTM, compute_layer_features, layer_indices
    from kerasbert.model.backbone import all_layer_outputs_model
    from kerasbert.plugins import resolve_kind

    backbone, name, features = load(args)
    indices = layer_indices(args.layers, len(backbone.transformer_layers))
    all_layers = all_layer_outputs_model(backbone)
    labels = features.labels
    n = len(labels)

    def make_step(head, read_features):
        optimizer = keras.optimizers.Adam(1e-3)
        spec = tf.TensorSpec([None, None], tf.int32)

        @tf.function(input_signature=[spec, spec, spec, spec, tf.TensorSpec(
            [None, len(indices), None, backbone.hidden_dim], tf.float16)])
        def step(token_ids, segment_ids, padding_mask, labels, cached):
            x = read_features(token_ids, segment_ids, padding_mask, cached)
            with tf.GradientTape() as tape:
                logits = head(dict(x, padding_mask=padding_mask), training=True)
                loss = tf.reduce_mean(resolve_kind("tagging").per_example_loss(labels, logits))
            variables = head.trainable_variables
            optimizer.apply(tape.gradient(loss, variables), variables)
            return loss

        return step

    def live_features(token_ids, segment_ids, padding_mask, cached):
        outputs = all_layers({"token_ids": token_ids, "segment_ids": segment_ids,
                              "padding_mask": padding_mask}, training=False)
        return {"all_layers": [tf.stop_gradient(o) for o in outputs]}

    def cached_features(token_ids, segment_ids, padding_mask, cached):
        return {"layer_features": cached}

    def run_epoch(step, cache):
        start = time.perf_counter()
        for rows, width in batches(features, args.batch_size):
            inputs = [features.inputs[k][rows, :width] for k in ("token_ids", "segment_ids",
                                                                  "padding_mask")]
            x = (np.asarray(cache[rows, :, :width], np.float16) if cache is not None else
                 np.zeros([len(inputs[0]), len(indices), width, backbone.hidden_dim], np.float16))
            step(*inputs, labels[rows, :width], x)
        return time.perf_counter() - start

    def timed(step, cache):
        run_epoch(step, cache)  # warm-up: tracing
        return min(run_epoch(step, cache) for _ in range(args.epochs))

    keras.utils.set_random_seed(0)
    live_head = FeatureBiLSTM(9, layers=args.layers, lstm_units=args.lstm_units, seed=0)
    live = timed(make_step(live_head, live_features), None)

    with tempfile.TemporaryDirectory() as cache_dir:
        start = time.perf_counter()
        cache = compute_layer_features(backbone, features.inputs, args.layers,
                                       batch_size=args.batch_size, cache_dir=cache_dir)
        extract = time.perf_counter() - start
        size = os.path.getsize(cache.filename) / 2**20
        cached_head = FeatureBiLSTM(9, layers=args.layers, lstm_units=args.lstm_units, seed=0)
        cached = timed(make_step(cached_head, cached_features), cache)

    device = "GPU" if tf.config.list_physical_devices("GPU") else f"CPU ({os.cpu_count()} cores)"
    print(f"encoder {name} (L={len(backbone.transformer_layers)}, H={backbone.hidden_dim}), "
          f"{n} rows at max_seq_length {args.max_seq_length}, batch {args.batch_size}, "
          f"layers {args.layers}, BiLSTM {args.lstm_units} units, {device}")
    print(f"  live encoder:   {live:8.2f} s/epoch")
    print(f"  cached:         {cached:8.2f} s/epoch  (speed-up x{live / cached:.2f})")
    print(f"  extraction:     {extract:8.2f} s once, {size:.1f} MB float16 on disk")
    saved = live - cached
    if saved > 0:
        print(f"  break-even after {extract / saved:.1f} epoch(s)")


if __name__ == "__main__":
    main()
