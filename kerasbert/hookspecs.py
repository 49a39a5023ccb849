"""The plugin contract: the task kinds, heads and tasks a plugin may provide.

    kerasbert_kinds   TaskKind objects (kerasbert/kinds/base.py): loss, label layout,
                      landscape and serving of every task of a kind
    kerasbert_heads   HeadSpec: a named head and the kinds it serves
    kerasbert_tasks   Task objects (kerasbert/tasks/base.py): files, features, metrics
    kerasbert_experiments   ExperimentSpec: a named experiment that
                      `python -m kerasbert.experiments NAME` runs (kerasbert/experiments/)
    kerasbert_define_flags   a plugin's own absl flags

kerasbert's own kinds, heads and tasks register through these hooks exactly like
third-party packages do. A third-party distribution declares an entry point in the group
`kerasbert.plugins` pointing at a module (or object) with `@hookimpl` functions:

    [options.entry_points]
    kerasbert.plugins =
        mean_pool = kerasbert_mean_pool

and then `python -m kerasbert.main --head=mean_pool ...` works with no change to kerasbert.
Set `KERASBERT_DISABLE_PLUGIN_AUTOLOAD=1` to load only the built-ins, or pass
`--disable_plugins=name,...` to block named plugins.
"""

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import pluggy

PROJECT = "kerasbert"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@dataclasses.dataclass(frozen=True)
class HeadContext:
    """What a head factory is told about the task and encoder it will sit on."""

    kind: str  # the task kind's name (a registered kerasbert.kinds.base.TaskKind)
    num_outputs: int  # classes for classification, 1 for regression / choice scores
    hidden_dim: int  # the encoder's hidden size H
    dropout: float  # the encoder's dropout rate, a sensible default for the head
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # head flags
    # For initialisers and dropout layers, so restarts differ only by seed: the run's
    # --head_init_seed; dropout layers seeded from it (seed + k) are moved to the
    # run's --dropout_seed (+ k) once built (kerasbert.model.builder.reseed_dropout).
    seed: int | None = None
    # The task's label names in output order, one per output (len == num_outputs); none for
    # regression, or where the task's num_outputs is not one per label.
    labels: Sequence[str] = ()
    num_layers: int | None = None  # the encoder's transformer layers (None: not told)


@dataclasses.dataclass(frozen=True)
class HeadSpec:
    """A head that can be put on the encoder, registered under a unique name.

    `build(context)` returns a `keras.layers.Layer` whose `call(features, training=False)`
    receives a dict with the encoder outputs `sequence_output` [batch, seq, H] and
    `pooled_output` [batch, H] plus the int32 inputs `token_ids`, `segment_ids` and
    `padding_mask` [batch, seq], and returns:
      - classification: logits [batch, num_outputs]
      - regression: predictions [batch, 1]
      - multiple_choice: one score per sequence [batch, 1] (choices are flattened into
        the batch before the encoder and regrouped after the head)
      - span: start and end logits [batch, seq, 2]
      - tagging: per-token logits [batch, seq, num_outputs]
    Two optional attributes of the built layer: `needs_all_layers = True` adds
    `all_layers` (embeddings and every transformer layer's output) to the features;
    `trains_backbone = False` keeps the encoder frozen in every phase. An optional method,
    `per_example_loss(labels, outputs, inputs)` -> float32 [batch], is the head's own
    training loss on its `call(training=True)` outputs, used instead of the kind's; the
    head's inference outputs stay in the layout above, decoded by the kind as usual (see
    kerasbert/kinds/base.py: a CRF head returns its Viterbi path as the argmax).
    """

    name: str
    kinds: Sequence[str]
    build: Callable[[HeadContext], Any]
    description: str = ""


@dataclasses.dataclass(frozen=True)
class ExperimentSpec:
    """An experiment `python -m kerasbert.experiments NAME --flags` runs, under a unique name.

    `module` is the dotted name of the module that runs it; it is imported only when the
    experiment is chosen (its absl flags are defined at import) and must have
    `run(argv)`, a command's body that parses `argv` (argv[0] is the program's name) and
    returns the exit status. `description` is the one line `--list` prints; `reproduces`
    names the paper's table or figure, where there is one.
    """

    name: str
    module: str
    description: str = ""
    reproduces: str = ""


@hookspec
def kerasbert_heads() -> Sequence[HeadSpec]:
    """Return the heads this plugin provides (a list of `HeadSpec`)."""


@hookspec
def kerasbert_tasks() -> Sequence[Any]:
    """Return the tasks this plugin provides (instances of `kerasbert.tasks.base.Task`, whose
    docstring is the contract: a task that leaves a required method to the base class is
    reported at start, naming the method, and skipped). Besides the required methods a
    task declares its `description`, `main_metric` and its direction (`greater_is_better`)
    and may bring its per-example scores (`per_example_scores`) and its own serving
    post-processing (`serving_answer`); its predictions are its kind's `decode` unless it
    overrides `predictions`."""


@hookspec
def kerasbert_kinds() -> Sequence[Any]:
    """Return the task kinds this plugin provides (instances of
    `kerasbert.kinds.base.TaskKind`): a kind carries the loss, the label layout, the
    decoding of outputs into predictions (`decode`) and what the landscape and the export
    need of every task of that kind. A task names its kind (`Task.kind`); a kind must be
    registered (by any plugin) before a task of it runs."""


@hookspec
def kerasbert_experiments() -> Sequence[ExperimentSpec]:
    """Return the experiments this plugin provides (a list of `ExperimentSpec`)."""


@hookspec
def kerasbert_define_flags(flag_values) -> None:
    """Define this plugin's own absl flags on `flag_values` (e.g. a head's hidden size).

    Flags defined here are parsed with kerasbert's and reach the head as
    `HeadContext.options` (all flags whose name starts with the head's name + "_").
    """
