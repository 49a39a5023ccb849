"""Training from a file too large to hold in memory (--stream_train_data).

In memory, a training split is a list of Examples and then padded feature arrays:
~4 + ~20 times the size of a GLUE TSV (docs/experiments/speed-and-memory.md, Reader
memory). Streamed, it is:

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

# --stream_train_data=auto streams a training file of at least this size.
AUTO_MIN_BYTES = 64 * 2**20
CHUNK = 1024  # examples featurized at once (one tokenizer call per text column)


def train_file(config, task):
    """The training file the run reads, or None when it does not read one (TFDS)."""
    if config.train_file:
        return config.train_file
    if config.use_tfds:
        return None
    return task.split_path(config.data_dir or task.sample_dir(), "train")


def should_stream(config, task):
    """Whether the run streams its training split; InputError where asked for and impossible."""
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
    return storage.getsize(train_file(config, task)) >= AUTO_MIN_BYTES


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
