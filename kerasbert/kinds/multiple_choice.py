"""Multiple choice (SWAG): one [CLS] context [SEP] ending [SEP] sequence per choice."""

import numpy as np
import tensorflow as tf

from kerasbert.data.tokenization import pack_inputs
from kerasbert.kinds.base import Serving
from kerasbert.kinds.classification import ClassificationKind


def encode_choices(tokenizer, inputs, max_seq_length):
    """[CLS] context [SEP] ending_k [SEP] for every k, as [batch, choices, max_seq_length]."""
    context, endings = inputs["context"], inputs["endings"]
    batch, choices = tf.shape(endings)[0], tf.shape(endings)[1]
    tf.debugging.assert_equal(tf.size(context), batch,
                              message="context and endings need the same number of rows")
    # Each context is tokenized once and repeated for its endings, as SwagTask.featurize does.
    ids_context = tf.gather(tokenizer.tokenize_ids(context),
                            tf.repeat(tf.range(batch), choices))
    ids_endings = tokenizer.tokenize_ids(tf.reshape(endings, [-1]))
    packed = pack_inputs(tokenizer, ids_context, ids_endings, max_seq_length)
    return {k: tf.reshape(v, [batch, choices, max_seq_length]) for k, v in packed.items()}


def _choice_outputs(task, logits):
    logits = tf.cast(logits, tf.float32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}


class MultipleChoiceKind(ClassificationKind):
    """Inputs [B, C, S]; the head scores each sequence, regrouped to logits [B, C]; labels
    int32 [B]: the same loss and accuracy as classification, over the choices."""

    name = "multiple_choice"
    description = "pick one of C endings (inputs [B, C, S], logits [B, C], labels int32 [B])"
    inputs_rank = 3

    def constant_outputs(self, features, num_outputs):
        """Each choice picked for every row."""
        rows, choices = features.inputs["token_ids"].shape[:2]
        return [np.eye(choices, dtype=np.float32)[np.full(rows, c)] for c in range(choices)]
    serving = Serving(lambda task: {"context": [None], "endings": [None, None]},
                      _choice_outputs, encode=encode_choices)
