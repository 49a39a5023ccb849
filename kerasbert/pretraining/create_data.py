"""Pre-training data from raw text (BERT's create_pretraining_data.py, as TFRecord shards).

    python -m kerasbert.pretraining.create_data --input_file=corpus.txt \
        --output_dir=pretraining_data --vocab_size=4000 --max_seq_length=128 \
        --next_sentence_prob=0.5 --dupe_factor=5

Input: one sentence per line, a blank line between documents. With no --vocab_file a
WordPiece vocabulary of --vocab_size is learned from the corpus (tensorflow_text's BERT
vocabulary trainer) and written to <output_dir>/vocab.txt. See
kerasbert/pretraining/data.py for the format and the sampling.
"""

import os

from absl import flags

from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.pretraining import data as data_lib
from kerasbert.pretraining.cli import run

FLAGS = flags.FLAGS
_DEFAULTS = data_lib.DataOptions()

flags.DEFINE_string("input_file", None, "Comma-separated globs of raw text files.")
flags.DEFINE_string("output_dir", None, "Where the shards, heldout.tfrecord, vocab.txt and "
                    "data_config.json go.")
flags.DEFINE_string("vocab_file", None, "A WordPiece vocabulary; default: learn one.")
flags.DEFINE_integer("vocab_size", 8000, "Target size of a learned vocabulary.")
flags.DEFINE_boolean("do_lower_case", True, "Lower-case and strip accents.")
flags.DEFINE_integer("max_seq_length", _DEFAULTS.max_seq_length, "Tokens per instance.")
flags.DEFINE_integer("max_predictions_per_seq", _DEFAULTS.max_predictions_per_seq,
                     "At most this many masked tokens per instance.")
flags.DEFINE_float("masked_lm_prob", _DEFAULTS.masked_lm_prob, "Fraction of tokens to mask.")
flags.DEFINE_float("next_sentence_prob", _DEFAULTS.next_sentence_prob, "Probability that "
                   "segment B is a random span of another document (0 = always the true "
                   "continuation, for objectives without NSP).")
flags.DEFINE_float("short_seq_prob", _DEFAULTS.short_seq_prob, "Probability of a shorter "
                   "random target length.")
flags.DEFINE_boolean("whole_word_masking", False, "Mask all word pieces of a word together.")
flags.DEFINE_integer("dupe_factor", _DEFAULTS.dupe_factor, "Passes over the corpus, each "
                     "with different masks.")
flags.DEFINE_integer("documents_per_chunk", _DEFAULTS.documents_per_chunk, "Documents held "
                     "in memory at once (random next sentences come from the same chunk).")
flags.DEFINE_float("heldout_fraction", _DEFAULTS.heldout_fraction, "Fraction of documents "
                   "written to heldout.tfrecord instead of the training shards.")
flags.DEFINE_integer("num_shards", _DEFAULTS.num_shards, "Training TFRecord shards.")
flags.DEFINE_integer("random_seed", _DEFAULTS.seed, "Seed for sampling and masking.")
flags.DEFINE_boolean("verbose", False, "Full tracebacks for input errors.")


def main():
    for name in ("input_file", "output_dir"):
        if not FLAGS[name].value:
            raise InputError(f"--{name}: required")
    files = data_lib.expand_files(FLAGS.input_file)
    options = data_lib.DataOptions(
        max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob, next_sentence_prob=FLAGS.next_sentence_prob,
        short_seq_prob=FLAGS.short_seq_prob, whole_word_masking=FLAGS.whole_word_masking,
        dupe_factor=FLAGS.dupe_factor, documents_per_chunk=FLAGS.documents_per_chunk,
        heldout_fraction=FLAGS.heldout_fraction, num_shards=FLAGS.num_shards,
        seed=FLAGS.random_seed)
    options.check()
    vocab_file = FLAGS.vocab_file
    if not vocab_file:
        vocab_file = os.path.join(FLAGS.output_dir, "vocab.txt")
        size = data_lib.learn_vocab(files, FLAGS.vocab_size, FLAGS.do_lower_case, vocab_file)
        print(f"create_data: learned a {size}-token vocabulary: {vocab_file}")
    tokenizer = WordPieceTokenizer(vocab_file, do_lower_case=FLAGS.do_lower_case)
    config = data_lib.create_pretraining_data(files, FLAGS.output_dir, tokenizer, options)
    print(f"create_data: {config['train_instances']} training and "
          f"{config['heldout_instances']} held-out instances in {FLAGS.output_dir}")
    return 0


if __name__ == "__main__":
    run(main, "create_data")
