"""Feature arrays → tf.data, batched, each batch trimmed to its own longest sequence.

Real GLUE text is mostly short (SST-2: ~13 word pieces on average), so padding every
batch to max_seq_length wastes most of the compute. Trimming the all-padding columns
changes no result: padded positions are masked out of attention and never read.
"""

import numpy as np
import tensorflow as tf

ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")
# Where the sequence axis is in inputs other than the ids (last axis): cached encoder
# layers (kerasbert/heads/feature_bilstm.py) are [batch, layers, seq, hidden].
SEQUENCE_AXIS = {"layer_features": 2}


def make_dataset(inputs, labels, batch_size, shuffle_seed=None, labels_per_token=False):
    """Yields (inputs dict, labels) batches; labels are zeros when absent. The ids are
    int32; other inputs (cached features) keep their dtype.

    With `shuffle_seed`, the whole split is shuffled with that seed (one seed per epoch
    gives a reproducible data order, which a resumed run can replay).
    """
    count = len(next(iter(inputs.values())))
    if labels is None:
        labels = np.zeros([count], np.int32)
    ds = tf.data.Dataset.from_tensor_slices((
        {k: np.asarray(v, np.int32) if k in ID_INPUTS else np.asarray(v)
         for k, v in inputs.items()}, labels))
    if shuffle_seed is not None:
        ds = ds.shuffle(count, seed=shuffle_seed, reshuffle_each_iteration=False)
    return batch_rows(ds, batch_size, labels_per_token)


def batch_rows(ds, batch_size, labels_per_token=False):
    """A dataset of (inputs, label) rows -> batches trimmed to their longest sequence
    (shared by the in-memory and the streamed training split, data/streaming.py)."""

    def trim_padding(inputs, labels):
        length = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["padding_mask"], axis=-1)), 1)
        if labels_per_token:  # tagging labels are [batch, seq] like the inputs
            labels = labels[..., :length]
        return {k: v[:, :, :length] if SEQUENCE_AXIS.get(k) == 2 else v[..., :length]
                for k, v in inputs.items()}, labels

    ds = ds.batch(batch_size).map(trim_padding, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def dataset_of(features, batch_size, shuffle_seed=None, labels_per_token=False):
    """A split's batches, whether its arrays are in memory (Features) or it is streamed
    from its file (data/streaming.StreamedFeatures)."""
    if hasattr(features, "make_dataset"):
        return features.make_dataset(batch_size, shuffle_seed, labels_per_token)
    return make_dataset(features.inputs, features.labels, batch_size, shuffle_seed,
                        labels_per_token)


def num_rows(features):
    """Feature rows of a split (not examples: a SQuAD example may give several)."""
    if hasattr(features, "num_rows"):
        return features.num_rows
    return len(next(iter(features.inputs.values())))
