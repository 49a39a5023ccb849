"""The generic tasks on a user's own files, named as HuggingFace's examples name them:

    text.py       text_classification, text_regression (CSV, TSV, JSON Lines)
    tokens.py     token_classification (CoNLL-style columns, JSON Lines tokens/tags)
    questions.py  question_answering (SQuAD-format JSON, --version_2_with_negative)
    choice.py     multiple_choice (--context_column, --ending_columns)
    table.py      the file formats, by extension; labels.py  the label set and its checks
    files.py      the splits' files, each read once per run, checked before the encoder loads

The label set is taken from the training file (sorted) unless --label_list fixes it, and is
kept in run_config.json (`label_list`), so a reloaded run (export, landscape, predict)
rebuilds the same task.
"""

from kerasbert.tasks.own_files import choice, questions, text, tokens


def all_tasks():
    return [text.CLASSIFICATION_TASK, text.REGRESSION_TASK, tokens.TASK, questions.TASK,
            choice.TASK]
