"""SQuAD v1.1 and v2.0, one module per stage:

    reader.py    the official JSON (and TFDS) -> SquadExample
    features.py  windows over the passage, [CLS] question [SEP] window [SEP] rows, labels
    decoding.py  n-best spans over a question's windows, the v2 null threshold
    metrics.py   the official evaluate-v1.1.py / evaluate-v2.0.py scores
    serving.py   the same decoding inside the exported SavedModel (Task.serving_answer)
    task.py      SquadTask (squad_v1, squad_v2): BERT's recipe and options

Follows the behaviour of google-research/bert's `run_squad.py` (read for behaviour, not
copied), so numbers are comparable with the paper:

  * Reading: each context is split on whitespace (" \\t\\r\\n" and U+202F) into words with
    their character offsets; an answer's character span becomes a word span, then a
    word-piece span, which is tightened to the word pieces of the answer text itself
    (`improve_answer_span`: "(1887)," -> "1887").
  * Features: `[CLS] question [SEP] passage window [SEP]`, question = segment A cut to
    max_query_length pieces. A passage longer than the room left is cut into windows that
    start doc_stride pieces apart (`doc_windows`); a piece seen in several windows is
    scored only in the one where it has the most context (`max_context_masks`).
  * Labels [rows, 2] = (start, end) positions of the gold answer in the row. A window that
    does not hold the whole answer, and an unanswerable question (v2), point at [CLS]
    (position 0). v1 keeps such windows too, as BERT does: the model learns to put little
    weight on spans of windows without the answer, and decoding never picks [CLS] in v1.
    Dev rows get labels the same way (first answer), only so that a loss can be computed;
    decoding works from the model outputs alone.
  * Decoding (`decode`): for each question, over all its windows, the n_best_size best
    starts and ends of each window, pairs with end >= start, length <= max_answer_length,
    both inside the passage and the start in its max-context window; score = start logit
    + end logit. The best span's word pieces are mapped back onto the original words
    (`get_final_text`), keeping the original casing, accents and punctuation.
  * v2.0: s_null = the smallest [CLS] score (start_logits[0] + end_logits[0]) over the
    question's windows; the answer is "" when s_null - s_best_span > the threshold. The
    null odds s_null - s_best_span are written to null_odds.json and searched for the
    threshold that maximises F1 (metrics best_f1 / best_f1_thresh).

Gold answers that cannot be found in the context (text differs from the context at
answer_start after whitespace normalisation, or runs past its end) are kept: the count and
the first ids are logged as a warning and listed in `features.extra["unlocated_answers"]`;
such a question trains towards [CLS] when none of its answers is located, and is still
scored against its gold texts.
"""
from kerasbert.tasks.squad.decoding import (  # noqa: F401
    NO_SPAN_ODDS,
    Decoded,
    as_logits,
    decode,
    get_final_text,
)
from kerasbert.tasks.squad.features import (  # noqa: F401
    OPTIONS,
    Document,
    build_documents,
    build_features,
    doc_windows,
    improve_answer_span,
    locate_answer,
    max_context_masks,
    split_words,
)
from kerasbert.tasks.squad.reader import Answer, SquadExample, read_squad_file  # noqa: F401
from kerasbert.tasks.squad.task import TASKS, SquadTask  # noqa: F401
