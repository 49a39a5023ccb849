"""CoNLL-2003 named entity recognition, one module per stage:

    reader.py    the shared-task files (and TFDS conll2003) -> Sentence, IOB2 tags
    features.py  word-piece alignment, windows of whole words, document context
    decoding.py  one predicted tag per input word
    metrics.py   conlleval's entity P/R/F1, prediction files and their scoring
    serving.py   the same alignment and decoding inside the exported SavedModel
    task.py      ConllTask (conll2003)

Files: `<data_dir>/train.txt`, `valid.txt`, `test.txt` in the shared-task layout, one word a
line (`word POS chunk NER`, the NER tag last), a blank line between sentences, `-DOCSTART-`
lines between documents. Tags are read in IOB1 or IOB2 and always kept as IOB2 (see
`fix_scheme`).

Words become BERT inputs as in the paper (section 4.3) and tf-models' `tasks/tagging.py`:
every word is word-pieced on its own; its first piece carries the word's label and the other
pieces get -1, which the loss and the predictions ignore. Sentences longer than
`max_seq_length - 2` pieces are never truncated: they are cut into overlapping windows at
word boundaries (see `windows`), and each word is labelled and predicted in exactly one
window, the one where it has the most context on both sides (SQuAD's max-context rule).
Predictions are mapped back to every input word, so a prediction file has exactly one tag
per word of the input.

Document context (--document_context, FLERT-style): a row may also hold the words around
its own in the sentence's `-DOCSTART-` document (`context_window`), unlabelled, so a word
is still labelled and predicted once, in its own window; 0 (the default) gives the rows
of each sentence alone.

Metric: entity-level precision, recall and F1 as conlleval computes them (an entity counts
only if its type and both boundaries match; an I- tag after O or after another type starts
an entity), via seqeval's default mode. Values are fractions in [0, 1] like seqeval's
(conlleval prints percentages), overall and per type (`PER_f1`, `PER_precision`,
`PER_recall`, `PER_support` = gold entities of the type); `accuracy` is conlleval's
token accuracy.
"""

from kerasbert.tasks.conll.decoding import predict_word_tags  # noqa: F401
from kerasbert.tasks.conll.features import (  # noqa: F401
    best_windows,
    context_pieces,
    context_window,
    count_rows,
    documents,
    featurize_sentences,
    windows,
    word_pieces,
)
from kerasbert.tasks.conll.metrics import (  # noqa: F401
    entity_counts,
    entity_metrics,
    evaluate_file,
    write_conll_predictions,
)
from kerasbert.tasks.conll.reader import (  # noqa: F401
    ENTITY_TYPES,
    LABELS,
    Sentence,
    fix_scheme,
    iter_conll_file,
    iter_sentences,
    read_conll_file,
    read_sentences,
)
from kerasbert.tasks.conll.task import TASK, ConllTask  # noqa: F401
