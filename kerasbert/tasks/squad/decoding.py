"""SQuAD decoding: the n-best spans of a question over all its windows, projected back
onto the original words, and (v2) the null score against the threshold."""

import dataclasses

import numpy as np

from kerasbert.kind_names import PADDING_LOGIT
from kerasbert.span_answers import (  # noqa: F401  (re-exported)
    NO_SPAN_ODDS, detokenize, get_final_text, max_context_masks)
from kerasbert.tasks.base import Features
from kerasbert.tasks.squad.features import OPTIONS


def _softmax(scores):
    scores = np.asarray(scores, np.float64)
    e = np.exp(scores - scores.max())
    return e / e.sum()


@dataclasses.dataclass
class Decoded:
    predictions: dict  # id -> answer text (v2: "" when the null score wins)
    nbest: dict  # id -> [{text, probability, start_logit, end_logit}]
    null_odds: dict  # v2: id -> s_null - best non-null score; {} for v1
    best_non_null: dict  # v2: id -> best non-empty answer ("" if none); {} for v1


def as_logits(outputs, num_rows: int, seq_length: int) -> np.ndarray:
    """Head outputs as float32 [rows, seq_length, 2]; batches trimmed to their own longest
    row (or a list of such batches) are padded back with PADDING_LOGIT."""
    parts = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    padded = []
    for part in parts:
        part = np.asarray(part, np.float32)
        if part.ndim != 3 or part.shape[-1] != 2 or part.shape[1] > seq_length:
            raise ValueError(f"span outputs must be [rows, <= {seq_length}, 2], got {part.shape}")
        pad = seq_length - part.shape[1]
        padded.append(np.pad(part, [(0, 0), (0, pad), (0, 0)], constant_values=PADDING_LOGIT))
    logits = np.concatenate(padded) if padded else np.zeros([0, seq_length, 2], np.float32)
    if len(logits) != num_rows:
        raise ValueError(f"{len(logits)} output rows for {num_rows} feature rows")
    return logits


def decode(outputs, features: Features, n_best_size: int = OPTIONS["n_best_size"],
           max_answer_length: int = OPTIONS["max_answer_length"], version_2: bool = False,
           null_score_diff_threshold: float = OPTIONS["null_score_diff_threshold"]) -> Decoded:
    """Answers, n-best lists and (v2) null odds from the head's raw outputs (see module doc)."""
    token_ids = features.inputs["token_ids"]
    logits = as_logits(outputs, *token_ids.shape)
    x = features.extra
    vocab, docs = x["vocab"], x["documents"]
    example_index, window_start = x["example_index"], x["window_start"]
    window_length, passage_offset = x["window_length"], x["passage_offset"]
    # BERT's _get_best_indexes: all positions by logit, ties to the lower index.
    best_starts = np.argsort(-logits[:, :, 0], axis=1, kind="stable")[:, :n_best_size]
    best_ends = np.argsort(-logits[:, :, 1], axis=1, kind="stable")[:, :n_best_size]
    bounds = np.searchsorted(example_index, np.arange(len(features.examples) + 1))
    out = Decoded({}, {}, {}, {})
    for i, example in enumerate(features.examples):
        rows = range(bounds[i], bounds[i + 1])
        doc = docs[x["doc_index"][i]]
        owned = max_context_masks([(window_start[r], window_length[r]) for r in rows])
        cands, null = [], None  # cands: arrays of (row, start, end) per window
        for k, r in enumerate(rows):
            if version_2:
                score = float(logits[r, 0, 0]) + float(logits[r, 0, 1])
                if null is None or score < null[0]:
                    null = (score, r, float(logits[r, 0, 0]), float(logits[r, 0, 1]))
            off, n = passage_offset[r], window_length[r]
            starts, ends = best_starts[r], best_ends[r]
            start_ok = (starts >= off) & (starts < off + n)
            start_ok[start_ok] = owned[k][starts[start_ok] - off]
            end_ok = (ends >= off) & (ends < off + n)
            s, e = starts[:, None], ends[None, :]
            valid = start_ok[:, None] & end_ok[None, :] & (e >= s) & (e - s < max_answer_length)
            a, b = np.nonzero(valid)  # start-major order, as BERT builds its list
            cands.append(np.stack([np.full(len(a), r), starts[a], ends[b]], axis=1))
        if null is not None:
            cands.append(np.array([[null[1], 0, 0]]))
        cands = np.concatenate(cands) if cands else np.zeros([0, 3], np.int64)
        start_l = logits[cands[:, 0], cands[:, 1], 0].astype(np.float64)
        end_l = logits[cands[:, 0], cands[:, 2], 1].astype(np.float64)
        nbest, seen = [], set()
        for c in np.argsort(-(start_l + end_l), kind="stable"):  # ties keep list order
            if len(nbest) >= n_best_size:
                break
            r, s, e = cands[c]
            text = "" if s == 0 else _span_text(r, s, e, token_ids, vocab, doc,
                                                window_start[r], passage_offset[r])
            if text in seen:
                continue
            seen.add(text)
            nbest.append((text, float(start_l[c]), float(end_l[c])))
        if version_2 and "" not in seen and null is not None:
            nbest.append(("", null[2], null[3]))
        if not nbest:  # no window, or no valid span in v1 (BERT writes the nonce "empty")
            nbest.append(("", 0.0, 0.0))
        probs = _softmax([sl + el for _, sl, el in nbest])
        qid = example.qas_id
        out.nbest[qid] = [{"text": t, "probability": float(p), "start_logit": sl, "end_logit": el}
                          for (t, sl, el), p in zip(nbest, probs)]
        if not version_2:
            out.predictions[qid] = nbest[0][0]
            continue
        best = next(((t, sl + el) for t, sl, el in nbest if t), None)
        odds = NO_SPAN_ODDS if best is None or null is None else null[0] - best[1]
        out.null_odds[qid] = odds
        out.best_non_null[qid] = best[0] if best else ""
        out.predictions[qid] = "" if best is None or odds > null_score_diff_threshold else best[0]
    return out


def _span_text(r, s, e, token_ids, vocab, doc, window_start, offset):
    """The original text of pieces s..e of row r (BERT's detokenize + get_final_text)."""
    pred = detokenize([vocab[t] for t in token_ids[r, s: e + 1].tolist()])
    first = doc.piece_to_word[window_start + s - offset]
    last = doc.piece_to_word[window_start + e - offset]
    orig = " ".join(doc.words[first: last + 1])
    tok = " ".join([b for b in doc.basic[first: last + 1] if b])
    return get_final_text(pred, orig, tok)
