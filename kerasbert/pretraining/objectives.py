"""The three pre-training objectives of BERT's ablations (section 5.1, Table 5).

  bert    masked LM + next sentence prediction (BERT's own pre-training)
  no_nsp  masked LM only
  ltr     a left-to-right LM: causal self-attention, every position predicts the next
          token, no NSP (OpenAI GPT's objective on BERT's data)

The LM output layer is keras-hub's `MaskedLMHead` (dense + GELU + LayerNorm, then the
transposed word embeddings plus a bias, as in BERT's `get_masked_lm_output`); the LTR
objective uses the same head at every position. NSP is a 2-way linear layer on the
pooled [CLS] output.

`lm_statistics` returns sums (loss, correct, count), not means, so held-out metrics over
many batches and replicas are exact token-weighted averages.
"""

import math

import keras
import tensorflow as tf
from keras_hub.layers import MaskedLMHead

from kerasbert.errors import InputError
from kerasbert.model.backbone import hidden_activation

OBJECTIVES = ("bert", "no_nsp", "ltr")


def check_objective(objective):
    if objective not in OBJECTIVES:
        raise InputError(f"--objective={objective}: expected one of {', '.join(OBJECTIVES)}")
    return objective


def unmasked_token_ids(features):
    """The original token ids: masked positions get their `masked_lm_ids` back."""
    ids = features["input_ids"]
    weights = tf.cast(features["masked_lm_weights"] > 0, tf.int32)
    hits = tf.one_hot(features["masked_lm_positions"], tf.shape(ids)[1], dtype=tf.int32)
    hits *= weights[..., None]  # [batch, predictions, seq]
    replaced = tf.reduce_max(hits, axis=1) > 0
    originals = tf.reduce_sum(hits * features["masked_lm_ids"][..., None], axis=1)
    return tf.where(replaced, originals, ids)


@keras.saving.register_keras_serializable(package="kerasbert")
class PretrainingModel(keras.Model):
    """Encoder + LM head (+ NSP head for `bert`). Call on a batch of parsed features."""

    def __init__(self, backbone, objective, **kwargs):
        super().__init__(**kwargs)
        check_objective(objective)
        if (objective == "ltr") != bool(getattr(backbone, "causal", False)):
            raise InputError(f"--objective={objective} needs a "
                             f"{'causal' if objective == 'ltr' else 'bidirectional'} encoder")
        self.backbone = backbone
        self.objective = objective
        init = keras.initializers.TruncatedNormal(stddev=0.02)
        self.lm_head = MaskedLMHead(
            token_embedding=backbone.token_embedding,
            intermediate_activation=hidden_activation(backbone.hidden_act),
            layer_norm_epsilon=backbone.layer_norm_eps,
            # float32 under mixed precision too: the vocabulary softmax wants the range.
            kernel_initializer=init, dtype="float32", name="lm_head")
        self.nsp_head = (keras.layers.Dense(2, kernel_initializer=init, name="nsp_head")
                         if objective == "bert" else None)

    def call(self, features, training=False):
        ids = unmasked_token_ids(features) if self.objective == "ltr" else features["input_ids"]
        encoded = self.backbone({"token_ids": ids, "segment_ids": features["segment_ids"],
                                 "padding_mask": features["input_mask"]}, training=training)
        if self.objective == "ltr":
            length = tf.shape(ids)[1]
            positions = tf.broadcast_to(tf.range(length - 1)[None], [tf.shape(ids)[0], length - 1])
        else:
            positions = features["masked_lm_positions"]
        sequence = tf.cast(encoded["sequence_output"], tf.float32)
        outputs = {"lm_logits": self.lm_head(sequence, mask_positions=positions)}
        if self.nsp_head is not None:
            outputs["nsp_logits"] = tf.cast(self.nsp_head(encoded["pooled_output"]), tf.float32)
        return outputs


def lm_targets(objective, features):
    """(labels, weights) for the LM logits: the masked tokens, or for `ltr` token t+1 at
    every position t that has a real next token."""
    if objective == "ltr":
        ids = unmasked_token_ids(features)
        return ids[:, 1:], tf.cast(features["input_mask"][:, 1:], tf.float32)
    return features["masked_lm_ids"], features["masked_lm_weights"]


def statistics(objective, features, outputs):
    """Sums over the batch: lm_loss, lm_correct, lm_count, nsp_loss, nsp_correct, nsp_count."""
    labels, weights = lm_targets(objective, features)
    logits = outputs["lm_logits"]
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    stats = {"lm_loss": tf.reduce_sum(ce * weights),
             "lm_correct": tf.reduce_sum(correct * weights),
             "lm_count": tf.reduce_sum(weights)}
    zero = tf.constant(0.0)
    stats.update(nsp_loss=zero, nsp_correct=zero, nsp_count=zero)
    if "nsp_logits" in outputs:
        nsp_labels = features["next_sentence_labels"][:, 0]
        nsp_logits = outputs["nsp_logits"]
        stats["nsp_loss"] = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=nsp_labels, logits=nsp_logits))
        stats["nsp_correct"] = tf.reduce_sum(tf.cast(tf.equal(
            tf.argmax(nsp_logits, -1, output_type=tf.int32), nsp_labels), tf.float32))
        stats["nsp_count"] = tf.cast(tf.shape(nsp_labels)[0], tf.float32)
    return stats


def training_loss(stats):
    """BERT's loss on one replica's batch: mean LM loss over predicted tokens + mean NSP loss."""
    loss = stats["lm_loss"] / tf.maximum(stats["lm_count"], 1.0)
    return loss + stats["nsp_loss"] / tf.maximum(stats["nsp_count"], 1.0)


def summarize(objective, stats):
    """Held-out metrics from summed statistics (floats)."""
    count = max(stats["lm_count"], 1.0)
    mean_loss = stats["lm_loss"] / count
    prefix = "lm" if objective == "ltr" else "mlm"
    metrics = {f"{prefix}_loss": mean_loss,
               f"{prefix}_accuracy": stats["lm_correct"] / count,
               f"{prefix}_perplexity": math.exp(min(mean_loss, 700.0)),
               f"{prefix}_predictions": int(stats["lm_count"])}
    if objective == "bert":
        nsp = max(stats["nsp_count"], 1.0)
        metrics.update(nsp_loss=stats["nsp_loss"] / nsp, nsp_accuracy=stats["nsp_correct"] / nsp,
                       nsp_examples=int(stats["nsp_count"]))
    return metrics
