"""Pre-training examples from raw text, in the format of BERT's create_pretraining_data.py.

Input: text files with one sentence per line and a blank line between documents. Output:
TFRecord shards of `tf.train.Example`s with BERT's feature names (`input_ids`,
`input_mask`, `segment_ids`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`), so they read like Google's own files.

As in google-research/bert:
  * sentences of a document are packed into [CLS] A [SEP] B [SEP] up to max_seq_length
    (10% of the time a shorter random target length, `short_seq_prob`);
    one difference: a chunk that is a single sentence takes the next sentence along
    instead of always getting a random B, so the random share stays near
    `next_sentence_prob` on text of long sentences;
  * B is the true continuation, or with `next_sentence_prob` (BERT: 0.5) a random span
    of a *different* document; the unused true sentences are put back;
    next_sentence_labels is 1 for a random B, 0 for the true one;
  * 15% of the tokens (at most `max_predictions_per_seq`) are predicted: of these 80%
    become [MASK], 10% a random vocabulary token, 10% stay unchanged; with
    `whole_word_masking` all pieces of a word are masked together;
  * every document is used `dupe_factor` times with different masks.

Unlike BERT's script, the corpus streams: documents are processed in chunks of
`documents_per_chunk` (random B spans come from the same chunk), so memory does not grow
with the corpus. A `heldout_fraction` of the documents goes to a separate held-out file,
for the held-out MLM / NSP / LM metrics of `kerasbert.pretrain`.
"""

import dataclasses
import glob
import json
import os
import random

import numpy as np
import tensorflow as tf

from kerasbert.data.pipeline import without_autotuning
from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_json, atomic_write_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
DATA_CONFIG = "data_config.json"
HELDOUT_FILE = "heldout.tfrecord"


@dataclasses.dataclass(frozen=True)
class DataOptions:
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    next_sentence_prob: float = 0.5  # P(B is a random span of another document)
    short_seq_prob: float = 0.1
    whole_word_masking: bool = False
    dupe_factor: int = 10
    documents_per_chunk: int = 1000
    heldout_fraction: float = 0.05
    num_shards: int = 1
    seed: int = 12345

    def check(self):
        def bad(flag, why):
            raise InputError(f"--{flag}: {why}")

        if self.max_seq_length < 8:
            bad("max_seq_length", f"{self.max_seq_length} is too short (at least 8)")
        if not 0 < self.max_predictions_per_seq <= self.max_seq_length:
            bad("max_predictions_per_seq", f"must be in 1..max_seq_length, got "
                f"{self.max_predictions_per_seq}")
        for name in ("masked_lm_prob", "next_sentence_prob", "short_seq_prob",
                     "heldout_fraction"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0 if name == "next_sentence_prob" else 0.0 <= value < 1.0):
                bad(name, f"must be a probability, got {getattr(self, name)}")
        for name in ("dupe_factor", "documents_per_chunk", "num_shards"):
            if getattr(self, name) < 1:
                bad(name, f"must be at least 1, got {getattr(self, name)}")


# --- Reading the corpus --------------------------------------------------------------------

def expand_files(patterns, flag="input_file"):
    """Comma-separated globs -> sorted file list; InputError when nothing matches."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p]
    files = []
    for pattern in patterns:
        matched = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matched:
            raise InputError(f"--{flag}: no file matches {pattern!r}")
        files += matched
    if not files:
        raise InputError(f"--{flag}: required")
    return files


def read_documents(files):
    """Yields documents (lists of non-empty sentence lines), one file after another."""
    for path in files:
        document = []
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line:
                        document.append(line)
                    elif document:
                        yield document
                        document = []
        except UnicodeDecodeError as e:
            raise InputError(f"{at(path)}not UTF-8 text ({e.reason} at byte {e.start})") from None
        except OSError as e:
            raise InputError(f"{at(path)}cannot read: {e.strerror}") from None
        if document:
            yield document


def learn_vocab(files, vocab_size, do_lower_case, out_file):
    """A WordPiece vocabulary learned from the corpus (tensorflow_text's BERT vocab trainer),
    BERT's special tokens first. Returns the number of tokens written."""
    # Lazy: tf-text's vocabulary learner (and its Apache Beam-style imports) is needed only
    # when a corpus has no vocabulary yet.
    from tensorflow_text.tools.wordpiece_vocab import (
        bert_vocab_from_dataset as bert_vocab,
    )

    def sentences():
        for document in read_documents(files):
            yield from document

    dataset = tf.data.Dataset.from_generator(
        sentences, output_signature=tf.TensorSpec([], tf.string)).batch(1000)
    vocab = bert_vocab.bert_vocab_from_dataset(
        dataset, vocab_size=vocab_size, reserved_tokens=list(SPECIAL_TOKENS),
        bert_tokenizer_params={"lower_case": bool(do_lower_case)})
    if len(vocab) <= len(SPECIAL_TOKENS):
        raise InputError(f"--input_file: too little text to learn a vocabulary from "
                         f"({', '.join(files)})")

    atomic_write_text(out_file, "".join(t + "\n" for t in vocab))
    return len(vocab)


# --- Instances (google-research/bert create_instances_from_document) ---------------------

@dataclasses.dataclass
class Instance:
    token_ids: list  # [CLS] A [SEP] B [SEP], masked
    segment_ids: list
    masked_positions: list
    masked_labels: list  # the original ids at masked_positions
    is_random_next: bool


def truncate_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """BERT's truncate_seq_pair: trims the longer side, randomly from its front or back."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def sentence_pairs(documents, index, options, rng):
    """(tokens_a, tokens_b, is_random_next) pairs of `documents[index]` (lists of token-id
    lists per sentence); a random B comes from another document of `documents`."""
    document = documents[index]
    max_num_tokens = options.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < options.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    pairs, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if len(chunk) == 1 and i + 1 < len(document):
                # BERT would force a random B here, which pushes the random share far above
                # `next_sentence_prob` when sentences are long; take the next one along.
                i += 1
                chunk.append(document[i])
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for s in chunk[:a_end] for t in s]
                tokens_b = []
                random_next = False
                # A one-sentence chunk (the document's last sentence) can only have a
                # random B; without NSP (next_sentence_prob 0) it is dropped instead.
                alone = len(chunk) == 1 and options.next_sentence_prob > 0
                if len(documents) > 1 and (alone or rng.random() < options.next_sentence_prob):
                    random_next = True
                    target_b = max(1, target - len(tokens_a))
                    other = rng.randrange(len(documents) - 1)
                    other += other >= index  # any document but this one
                    start = rng.randrange(len(documents[other]))
                    for sentence in documents[other][start:]:
                        tokens_b.extend(sentence)
                        if len(tokens_b) >= target_b:
                            break
                    i -= len(chunk) - a_end  # the unused true sentences are not wasted
                else:
                    tokens_b = [t for s in chunk[a_end:] for t in s]
                truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                if tokens_a and tokens_b:
                    pairs.append((tokens_a, tokens_b, random_next))
            chunk, length = [], 0
        i += 1
    return pairs


def mask_tokens(token_ids, maskable, word_starts, options, vocab_size, mask_id, rng):
    """BERT's create_masked_lm_predictions on one sequence.

    Args:
        token_ids: list of ids ([CLS] A [SEP] B [SEP]).
        maskable: bool per position (False for [CLS] / [SEP]).
        word_starts: bool per position, False for "##" continuation pieces (only used
            with whole-word masking).
    Returns:
        (masked ids, sorted positions, original ids at those positions).
    """
    groups = []
    for i, ok in enumerate(maskable):
        if not ok:
            continue
        if options.whole_word_masking and groups and not word_starts[i] and groups[-1][-1] == i - 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    rng.shuffle(groups)
    num_to_predict = min(options.max_predictions_per_seq,
                         max(1, round(len(token_ids) * options.masked_lm_prob)))
    output = list(token_ids)
    positions = []
    for group in groups:
        if len(positions) >= num_to_predict:
            break
        if len(positions) + len(group) > num_to_predict:
            continue  # a whole word that does not fit is skipped, as in BERT
        for i in group:
            draw = rng.random()
            if draw < 0.8:
                output[i] = mask_id
            elif draw < 0.9:
                pass  # kept
            else:
                output[i] = rng.randrange(vocab_size)
            positions.append(i)
    positions.sort()
    return output, positions, [token_ids[i] for i in positions]


def make_instance(tokens_a, tokens_b, random_next, ids, options, rng):
    """Packs a pair and masks it. `ids`: a `VocabIds`."""
    token_ids = [ids.cls] + tokens_a + [ids.sep] + tokens_b + [ids.sep]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    maskable = [t not in (ids.cls, ids.sep) for t in token_ids]
    word_starts = [not ids.is_continuation[t] for t in token_ids]
    masked, positions, labels = mask_tokens(token_ids, maskable, word_starts, options,
                                            ids.vocab_size, ids.mask, rng)
    return Instance(masked, segment_ids, positions, labels, random_next)


@dataclasses.dataclass(frozen=True)
class VocabIds:
    cls: int
    sep: int
    mask: int
    pad: int
    vocab_size: int
    is_continuation: np.ndarray  # bool per id: a "##" piece

    @classmethod
    def from_tokenizer(cls, tokenizer):
        missing = [t for t, i in zip(("[CLS]", "[SEP]", "[MASK]", "[PAD]"),
                                     (tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id,
                                      tokenizer.pad_id)) if i is None]
        if missing:
            raise InputError(f"{at(tokenizer.vocab_file)}vocabulary lacks {', '.join(missing)}")
        return cls(tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.pad_id,
                   tokenizer.vocab_size,
                   np.array([t.startswith("##") for t in tokenizer.vocab], bool))


def to_example(instance, options, pad_id):
    def pad(values, length, value=0):
        return list(values) + [value] * (length - len(values))

    n, p = options.max_seq_length, options.max_predictions_per_seq
    length = len(instance.token_ids)
    feature = {
        "input_ids": pad(instance.token_ids, n, pad_id),
        "input_mask": pad([1] * length, n),
        "segment_ids": pad(instance.segment_ids, n),
        "masked_lm_positions": pad(instance.masked_positions, p),
        "masked_lm_ids": pad(instance.masked_labels, p),
        "next_sentence_labels": [int(instance.is_random_next)],
    }
    example = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
               for k, v in feature.items()}
    weights = pad([1.0] * len(instance.masked_positions), p, 0.0)
    example["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(value=weights))
    return tf.train.Example(features=tf.train.Features(feature=example)).SerializeToString()


# --- The whole corpus -------------------------------------------------------------------------

def shard_names(output_dir, num_shards):
    return [os.path.join(output_dir, f"train-{i:05d}-of-{num_shards:05d}.tfrecord")
            for i in range(num_shards)]


def _tokenize_documents(tokenizer, documents):
    sentences = [s for d in documents for s in d]
    ids = tokenizer.tokenize_ids(sentences).to_list() if sentences else []
    out, k = [], 0
    for d in documents:
        doc = [s for s in ids[k:k + len(d)] if s]
        k += len(d)
        if doc:
            out.append(doc)
    return out


def create_pretraining_data(input_files, output_dir, tokenizer, options):
    """Writes train shards, the held-out file and data_config.json to `output_dir`.

    Files are written under temporary names and renamed at the end, so an interrupted
    run leaves no file that looks complete. Returns the data config (a dict).
    """
    options.check()
    ids = VocabIds.from_tokenizer(tokenizer)
    os.makedirs(output_dir, exist_ok=True)
    rng = random.Random(options.seed)
    split_rng = random.Random(options.seed + 1)  # held-out choice independent of masking
    finals = shard_names(output_dir, options.num_shards) + [os.path.join(output_dir, HELDOUT_FILE)]
    temps = [f + ".tmp" for f in finals]
    writers = [tf.io.TFRecordWriter(t) for t in temps]
    counts = {"train_instances": 0, "heldout_instances": 0, "train_documents": 0,
              "heldout_documents": 0, "random_next": 0}
    state = {"shard": 0}

    def flush(documents, heldout):
        documents = _tokenize_documents(tokenizer, documents)
        instances = []
        for _ in range(options.dupe_factor):
            for index in range(len(documents)):
                for a, b, random_next in sentence_pairs(documents, index, options, rng):
                    instances.append(make_instance(a, b, random_next, ids, options, rng))
        rng.shuffle(instances)
        kind = "heldout" if heldout else "train"
        counts[f"{kind}_documents"] += len(documents)
        counts[f"{kind}_instances"] += len(instances)
        for instance in instances:
            counts["random_next"] += instance.is_random_next
            if heldout:
                writers[-1].write(to_example(instance, options, ids.pad))
            else:
                writers[state["shard"]].write(to_example(instance, options, ids.pad))
                state["shard"] = (state["shard"] + 1) % options.num_shards

    try:
        buffers = {False: [], True: []}
        for document in read_documents(input_files):
            heldout = split_rng.random() < options.heldout_fraction
            buffers[heldout].append(document)
            if len(buffers[heldout]) >= options.documents_per_chunk:
                flush(buffers[heldout], heldout)
                buffers[heldout] = []
        for heldout, documents in buffers.items():
            if documents:
                flush(documents, heldout)
        for w in writers:
            w.close()
        if counts["train_instances"] == 0:
            raise InputError(f"--input_file: no training instance could be made from "
                             f"{', '.join(input_files)} (need documents of at least one "
                             f"sentence and two or more documents)")
        for tmp, final in zip(temps, finals):
            os.replace(tmp, final)
    except BaseException:
        for w in writers:
            w.close()
        for t in temps:
            if os.path.exists(t):
                os.remove(t)
        raise
    config = {**dataclasses.asdict(options), **counts,
              "vocab_file": os.path.abspath(tokenizer.vocab_file),
              "do_lower_case": tokenizer.do_lower_case,
              "input_files": [os.path.abspath(f) for f in input_files]}
    atomic_write_json(os.path.join(output_dir, DATA_CONFIG), config)
    return config


# --- Reading the shards back ------------------------------------------------------------------

def read_data_config(data_dir):
    path = os.path.join(data_dir, DATA_CONFIG)
    if not os.path.isfile(path):
        raise InputError(f"{at(path)}missing: not a folder written by "
                         f"kerasbert.pretraining.create_data")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def parse_fn(max_seq_length, max_predictions_per_seq):
    n, p = max_seq_length, max_predictions_per_seq
    spec = {
        "input_ids": tf.io.FixedLenFeature([n], tf.int64),
        "input_mask": tf.io.FixedLenFeature([n], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([n], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([p], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        return {k: tf.cast(v, tf.float32 if v.dtype == tf.float32 else tf.int32)
                for k, v in example.items()}

    return parse


def make_dataset(files, max_seq_length, max_predictions_per_seq, batch_size, training,
                 seed=None):
    """Batches of parsed examples; for training, shuffled and repeated forever. Without
    tf.data's autotuning, as fine-tuning's batches (pipeline.without_autotuning: its
    sleeping thread held the iterator's destruction, up to 60 s at the end of training)."""
    ds = tf.data.Dataset.from_tensor_slices(list(files))
    if training:
        ds = ds.shuffle(len(files), seed=seed).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 4),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.map(parse_fn(max_seq_length, max_predictions_per_seq),
                num_parallel_calls=tf.data.AUTOTUNE)
    if training:
        ds = ds.shuffle(10000, seed=seed)
    return without_autotuning(ds.batch(batch_size, drop_remainder=training)
                              .prefetch(tf.data.AUTOTUNE))
