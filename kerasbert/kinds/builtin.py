"""Registers kerasbert's own task kinds through the same hook third-party plugins use."""

from kerasbert.hookspecs import hookimpl


@hookimpl
def kerasbert_kinds():
    # Imported when the registry asks (lazy: TensorFlow loads only once kinds are needed,
    # not for --help or a flag error).
    from kerasbert.kinds.classification import ClassificationKind, RegressionKind
    from kerasbert.kinds.multiple_choice import MultipleChoiceKind
    from kerasbert.kinds.span import SpanKind
    from kerasbert.kinds.tagging import TaggingKind

    return [ClassificationKind(), RegressionKind(), MultipleChoiceKind(), SpanKind(),
            TaggingKind()]
