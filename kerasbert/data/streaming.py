"""Training from a file too large to hold in memory (--stream_train_data), or held
without its padding (CompactFeatures).

In memory, a training split is a list of Examples and then padded feature arrays:
~4 + ~20 times the size of a GLUE TSV, and ~80 times at the peak of an in-memory run
(docs/experiments/speed-and-memory.md, Reader memory). From AUTO_MIN_BYTES a split whose
rows allow it is held without its padding instead (CompactFeatures, below: a few times
the file, the same batches); from STREAM_MIN_BYTES, or where it cannot be, auto streams.
Streamed, it is:

  1. a counting pass before anything is written: the task's streaming reader
     (`task.iter_file`) reads and validates every line, so bad input is still one
     `file:line` error before --output_dir is touched, and the count gives the steps per
     epoch that the learning-rate schedule needs;
  2. every epoch, a tf.data pipeline over a generator that reads the file again and
     featurizes it CHUNK examples at a time with the task's own `featurize` (so the rows are
     exactly the in-memory ones), one row per element; then a shuffle buffer of
     --shuffle_buffer_size rows, seeded per epoch as in memory; then the same batching and
     padding trim as in memory (`pipeline.batch_rows`).

With a buffer at least as large as the split, tf.data's shuffle draws the same permutation
as the in-memory whole-split shuffle (the buffer is then min(buffer, count) = count in both),
so a streamed run trains on the same batches in the same order (tests/data/test_streaming.py).
A smaller buffer is a bounded, local shuffle: a file sorted by label then trains on long
runs of one label, so shuffle such a file once on disk first.

Tasks with a streaming reader stream (`Task.can_stream`: GLUE, SWAG, CoNLL-2003). A CoNLL
sentence longer than a row becomes several rows, so the counting pass also counts rows: it
word-pieces the sentences a chunk at a time (`task.count_rows`, the windows `featurize`
would make, without the arrays); and CoNLL's tag scheme (IOB1 or IOB2), which needs every
sentence, is checked at the end of that pass, where an in-memory read checks it (the
rewrite to IOB2 does not depend on the scheme, so each sentence is rewritten as it is
read). With --document_context a chunk never ends inside a document (`Task.keeps_together`),
so each row's context is the in-memory one. Like in memory, the steps of an epoch come from the examples (sentences) and the
accuracy weights from the rows.
SQuAD's file is one JSON document and stays in memory. Dev and test splits always do (their
predictions are written per example).
"""

import itertools

import numpy as np
import tensorflow as tf

from kerasbert import storage
from kerasbert.data import pipeline
from kerasbert.errors import InputError, at

# A training file of at least AUTO_MIN_BYTES is not held as padded arrays: --stream_train_data=
# auto streams it from the file, or, where its rows can be (`can_hold_compact`), holds it
# without its padding (CompactFeatures: the padded split's batches in ~1/20 of its memory)
# up to STREAM_MIN_BYTES, and streams it from there.
AUTO_MIN_BYTES = 64 * 2**20
STREAM_MIN_BYTES = 1024 * 2**20
CHUNK = 1024  # examples featurized at once (one tokenizer call per text column)


def train_file(config, task):
    """The training file the run reads, or None when it does not read one (TFDS)."""
    if config.train_file:
        return config.train_file
    if config.use_tfds:
        return None
    return task.split_path(config.data_dir or task.sample_dir(), "train")


def should_stream(config, task, kind=None):
    """Whether the run streams its training split; InputError where asked for and impossible.
    `kind`: the task's kind (None: its rows are not held compact)."""
    mode = config.stream_train_data
    if mode == "false" or not config.do_train:
        return False
    why_not = None
    if not task.can_stream:
        why_not = (f"the {task.name} task reads its training file whole (SQuAD: one JSON "
                   "document)")
    elif config.use_tfds:
        why_not = "--use_tfds reads a prepared TFDS dataset, not a file"
    elif config.feature_cache_dir:
        why_not = "--feature_cache_dir caches the features of the whole split"
    if mode == "true":
        if why_not:
            raise InputError(f"--stream_train_data=true: {why_not}; use "
                             "--stream_train_data=false (or auto)")
        return True
    if why_not:
        return False
    size = storage.getsize(train_file(config, task))
    if can_hold_compact(config, task, kind):
        return size >= STREAM_MIN_BYTES
    return size >= AUTO_MIN_BYTES


def can_hold_compact(config, task, kind):
    """Whether the training split can be held without its padding (CompactFeatures): a file
    the task reads line by line, of rows [rows, seq] (`kind.inputs_rank` 2: not multiple
    choice), not a --use_tfds or --feature_cache_dir run."""
    return (kind is not None and kind.inputs_rank == 2 and config.do_train and task.can_stream
            and not config.use_tfds and not config.feature_cache_dir)


def should_hold_compact(config, task, kind):
    """Whether an in-memory training split (`should_stream` said no) is held without its
    padding: a file of at least AUTO_MIN_BYTES that `can_hold_compact`, whatever
    --stream_train_data says (its batches are the padded split's)."""
    return (can_hold_compact(config, task, kind)
            and storage.getsize(train_file(config, task)) >= AUTO_MIN_BYTES)


class StreamedExamples:
    """The examples of a streamed split: their number, and the file read once more when
    iterated (never held)."""

    def __init__(self, task, path, split, limit, count):
        self.task, self.path, self.split, self.limit, self.count = task, path, split, limit, count

    def __len__(self):
        return self.count

    def __iter__(self):
        return itertools.islice(self.task.iter_file(self.path, self.split), self.limit)


class StreamedFeatures:
    """A training split read from its file every epoch; quacks like `Features` for
    `pipeline.dataset_of` / `pipeline.num_rows` (there are no arrays to hold)."""

    labels = None

    def __init__(self, task, path, tokenizer, max_seq_length, shuffle_buffer_size,
                 limit=None, split="train"):
        self.task, self.path, self.split = task, path, split
        self.tokenizer, self.max_seq_length = tokenizer, max_seq_length
        self.shuffle_buffer_size = shuffle_buffer_size
        self.limit = limit
        self._stamp = _stamp(path)
        # The counting pass: every line read and validated, only a chunk kept. The rows are
        # the task's count (one per example, or more: a long CoNLL sentence makes several,
        # counted by word-piecing the examples a chunk at a time).
        count, rows, pending = 0, 0, []
        for example in task.iter_file(path, split):
            if count == 0:
                first = task.featurize([example], tokenizer, max_seq_length)
                first_rows = task.count_rows([example], tokenizer, max_seq_length)
            count += 1
            if limit is None or count <= limit:
                pending.append(example)
                if len(pending) == CHUNK:
                    rows += task.count_rows(pending, tokenizer, max_seq_length)
                    pending = []
        num_examples = count if limit is None else min(count, limit)
        if pending:
            rows += task.count_rows(pending, tokenizer, max_seq_length)
        self.num_rows = rows
        if first.labels is None or len(next(iter(first.inputs.values()))) != first_rows:
            raise InputError(f"{at(path)}the {task.name} task cannot stream its training split "
                             "(its rows are unlabelled, or not as many as Task.count_rows says)")
        self.examples = StreamedExamples(task, path, split, limit, num_examples)
        self._signature = (
            {k: tf.TensorSpec([None, *v.shape[1:]], tf.as_dtype(v.dtype))
             for k, v in first.inputs.items()},
            tf.TensorSpec([None, *first.labels.shape[1:]], tf.as_dtype(first.labels.dtype)))

    def _chunks(self):
        for chunk in chunks(self.examples, self.task.keeps_together):
            features = self.task.featurize(chunk, self.tokenizer, self.max_seq_length)
            yield ({k: np.asarray(v, self._signature[0][k].dtype.as_numpy_dtype)
                    for k, v in features.inputs.items()}, features.labels)


    def make_dataset(self, batch_size, shuffle_seed=None, labels_per_token=False,
                     group_by_length=0):
        """One pass over the file as batches; shuffled with `shuffle_seed` in a buffer of
        min(--shuffle_buffer_size, rows) rows (then grouped by length as in memory)."""
        if _stamp(self.path) != self._stamp:  # its lines were checked, and counted, before
            raise InputError(f"{at(self.path)}changed since training started; a streamed "
                             "training file must stay as it is until the run ends")
        ds = tf.data.Dataset.from_generator(self._chunks, output_signature=self._signature)
        ds = ds.unbatch()
        if shuffle_seed is not None:
            ds = ds.shuffle(min(self.shuffle_buffer_size, self.num_rows), seed=shuffle_seed,
                            reshuffle_each_iteration=False)
        return pipeline.batch_rows(ds, batch_size, labels_per_token, group_by_length,
                                   shuffle_seed)


class CompactFeatures:
    """A training split held in memory without its padding: each row's ids up to its
    length, concatenated in the narrowest integer type that holds them (a GLUE row of ~14
    pieces: ~50 bytes, not the 1.5 KB of three int32 rows of 128). Rows are rebuilt padded
    one at a time as the dataset reads them, in the order of the in-memory whole-split
    shuffle (`pipeline.shuffle_order`: tf.data's permutation, without holding every row in
    its buffer), so the batches are the padded split's (tests/data/test_streaming.py). Quacks
    like `Features` for `pipeline.dataset_of` / `pipeline.num_rows`, as StreamedFeatures.

    The file is read once, CHUNK examples at a time through the task's own `featurize` (so
    the rows are its rows), and no Example is kept. Every input must be [rows, seq] with
    its padding a suffix (padding_mask 1s then 0s) holding one value per input; otherwise
    InputError (a task whose rows are not: --stream_train_data=true streams it).
    """

    labels = None

    def __init__(self, task, path, tokenizer, max_seq_length, limit=None, split="train",
                 labels_per_token=False):
        self.task, self.path, self.max_seq_length = task, path, max_seq_length
        parts, lengths, count, dtypes = {}, [], 0, None
        self.pad_values = {}
        self.per_token = {"labels"} if labels_per_token else set()
        for chunk in chunks(_first(task.iter_file(path, split), limit), task.keeps_together):
            count += len(chunk)
            f = task.featurize(chunk, tokenizer, max_seq_length)
            if f.labels is None:
                raise InputError(f"{at(path)}the {task.name} task's training rows are "
                                 "unlabelled")
            arrays = {k: v for k, v in f.inputs.items() if k != "padding_mask"}
            arrays["labels"] = f.labels
            mask = np.asarray(f.inputs["padding_mask"]) > 0
            if mask.ndim != 2:
                raise InputError(f"{at(path)}the {task.name} task's rows are not [rows, seq]; "
                                 "--stream_train_data=true streams them")
            length = mask.sum(axis=1)
            if not np.array_equal(mask, np.arange(mask.shape[1]) < length[:, None]):
                raise InputError(f"{at(path)}the {task.name} task's padding is not at the "
                                 "rows' ends; --stream_train_data=true streams them")
            lengths.append(length.astype(np.int32))
            if dtypes is None:
                dtypes = {k: np.asarray(v).dtype for k, v in arrays.items()}
                dtypes["padding_mask"] = np.asarray(f.inputs["padding_mask"]).dtype
            for k, v in arrays.items():
                v = np.asarray(v)
                if k == "labels" and not labels_per_token:  # the row's label(s), whole
                    parts.setdefault(k, []).append(v)
                    continue
                if v.shape != mask.shape:
                    raise InputError(f"{at(path)}the {task.name} task's {k} is not "
                                     "[rows, seq]; --stream_train_data=true streams it")
                padding = np.unique(v[~mask])
                pad = self.pad_values.setdefault(k, padding[0] if padding.size else 0)
                if padding.size > 1 or (padding.size and padding[0] != pad):
                    raise InputError(f"{at(path)}the {task.name} task pads {k} with more than "
                                     "one value; --stream_train_data=true streams it")
                parts.setdefault(k, []).append(_narrow(v[mask]))
            del f, arrays
        if not count:
            raise InputError(f"{at(path)}no training examples")
        self.examples = StreamedExamples(task, path, split, limit, count)
        lengths = np.concatenate(lengths)
        self.num_rows = len(lengths)
        # Held as tensors only (the dataset reads them every epoch): one copy, not two.
        self.starts = tf.constant(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)[:-1]]))
        self.lengths = tf.constant(_narrow(lengths))
        self.values = {}
        for k in list(parts):  # one input's pieces joined at a time
            self.values[k] = tf.constant(np.concatenate(parts.pop(k)))
        self.dtypes = dtypes

    def nbytes(self):
        """The bytes the split is held in."""
        return sum(int(t.numpy().nbytes) for t in (self.starts, self.lengths,
                                                   *self.values.values()))

    def make_dataset(self, batch_size, shuffle_seed=None, labels_per_token=False,
                     group_by_length=0):
        """The rows as batches; shuffled with `shuffle_seed` as the padded split would be."""
        width = self.max_seq_length
        values, starts, lengths = self.values, self.starts, self.lengths
        out = {k: tf.as_dtype(d) for k, d in self.dtypes.items()}

        def row(i):
            start, length = starts[i], tf.cast(lengths[i], tf.int32)
            rebuilt = {"padding_mask": tf.cast(tf.range(width) < length, out["padding_mask"])}
            for k, v in values.items():
                if k == "labels" and k not in self.per_token:
                    rebuilt[k] = tf.cast(v[i], out[k])
                    continue
                ids = tf.cast(v[start:start + tf.cast(length, tf.int64)], out[k])
                rebuilt[k] = tf.pad(ids, [[0, width - length]],
                                    constant_values=tf.cast(self.pad_values[k], out[k]))
            label = rebuilt.pop("labels")
            return rebuilt, label

        if shuffle_seed is None:
            ds = tf.data.Dataset.range(self.num_rows)
        else:  # the whole-split shuffle's order, without tf.data's buffer (~190 B a row)
            ds = tf.data.Dataset.from_tensor_slices(
                pipeline.shuffle_order(self.num_rows, shuffle_seed).astype(np.int64))
        ds = ds.map(row, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return pipeline.batch_rows(ds, batch_size, labels_per_token, group_by_length,
                                   shuffle_seed)


def _first(examples, limit):
    """The first `limit` examples (all with None), reading the rest too: a reader checks
    the whole file (CoNLL's tag scheme at its end), as an in-memory read does."""
    for i, example in enumerate(examples):
        if limit is None or i < limit:
            yield example


def _narrow(values):
    """`values` in the narrowest of int8, uint8, int16, uint16, int32 that holds them
    (floats and wider integers as they are)."""
    if values.dtype.kind not in "iu" or not values.size:
        return values
    low, high = values.min(), values.max()
    for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return values.astype(dtype)
    return values


def compact_train_split(config, task, tokenizer, labels_per_token=False):
    """The run's training split, held without its padding (CompactFeatures)."""
    return CompactFeatures(task, train_file(config, task), tokenizer, config.max_seq_length,
                           limit=config.max_train_examples, labels_per_token=labels_per_token)


def _stamp(path):
    return storage.stamp(path)


def stream_train_split(config, task, tokenizer):
    """The run's training split, streamed from its file (see the module docstring)."""
    return StreamedFeatures(task, train_file(config, task), tokenizer, config.max_seq_length,
                            config.shuffle_buffer_size, limit=config.max_train_examples)


def chunks(examples, keeps_together, size=None):
    """Lists of at least `size` (CHUNK) consecutive examples (the last may be shorter), never cut
    between two that `keeps_together` (CoNLL sentences of one document, with document
    context: their rows then are the in-memory ones)."""
    size, chunk = size or CHUNK, []
    for example in examples:
        if len(chunk) >= size and not keeps_together(chunk[-1], example):
            yield chunk
            chunk = []
        chunk.append(example)
    if chunk:
        yield chunk
