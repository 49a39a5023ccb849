"""Registers kerasbert's own task kinds through the same hook third-party plugins use."""

from kerasbert.hookspecs import hookimpl
from kerasbert.kinds.classification import ClassificationKind, RegressionKind
from kerasbert.kinds.multiple_choice import MultipleChoiceKind
from kerasbert.kinds.span import SpanKind
from kerasbert.kinds.tagging import TaggingKind


@hookimpl
def kerasbert_kinds():
    return [ClassificationKind(), RegressionKind(), MultipleChoiceKind(), SpanKind(),
            TaggingKind()]
