"""A finished run as one Keras model that takes raw strings: `.keras` files and predict().

    TextModel.from_run(loaded_run)      encoder + head with the run's trained weights, and the
                                        run's WordPiece tokenizer and packing, in one model
    model(["a great film", "dull"])     → probabilities [batch, labels] (classification,
                                          multiple choice) or score [batch] (regression)
    model.save("mine.keras"); keras.saving.load_model("mine.keras")   the same again

The tokenization and packing are the serving graph's (kerasbert/kinds: `Serving.encode`),
so a `.keras` file answers what the SavedModel export answers. Its config holds the run's
settings and the encoder's config, its assets the vocabulary; loading rebuilds the task model as the
run built it (kerasbert/model/builder.py) and Keras fills in the weights. The class is
registered as "kerasbert>TextModel": Keras finds it in a process that has imported this
module (`import kerasbert.export.keras_model`; any `kerasbert.load` or `.save` call has).

Span and tagging answers need post-processing over windows and words (the SavedModel's
`answer` functions); they are served by the SavedModel export, not by a `.keras` file.
"""

import copy
import dataclasses
import os
import tempfile

import keras
import tensorflow as tf

from kerasbert import plugins
from kerasbert.config import RunConfig, configure_task
from kerasbert.data.tokenization import WordPieceTokenizer, read_vocab
from kerasbert.errors import InputError
from kerasbert.export.saved_model import _trim_padding, kind_export
from kerasbert.model.builder import build_task_model, dummy_inputs

# Where the run read its data and encoder from: not needed to rebuild the model, and not
# there on another machine (RunConfig checks that the files it names exist).
INPUT_PATHS = ("data_dir", "tfds_data_dir", "train_file", "predict_file", "validation_file",
               "test_file", "vocab_file", "init_checkpoint", "export_dir", "feature_cache_dir")
VOCAB = "vocab.txt"
# The one numeric output of a kind's serving outputs that a .keras model returns.
ANSWERS = ("probabilities", "score")


def keras_output(task, registry=None):
    """The serving output a `.keras` model of `task` returns; InputError for kinds whose
    answer needs post-processing (span, tagging)."""
    serving = kind_export(task, registry)
    if serving.answer is not None:
        raise InputError(f"--task={task.name}: a {task.kind} answer needs post-processing "
                         "outside one model call; save it with .export(dir) (the SavedModel "
                         "for TF Serving and keras.layers.TFSMLayer) instead of .keras")
    return serving


def _tokenizer(vocabulary, do_lower_case):
    """A WordPieceTokenizer on `vocabulary` (it reads a file; the file is not needed after)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, VOCAB)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in vocabulary))
        return WordPieceTokenizer(path, do_lower_case=do_lower_case)


@keras.saving.register_keras_serializable(package="kerasbert")
class TextModel(keras.Model):
    """Raw strings in, the run's probabilities (or scores) out.

    Inputs: a [batch] string tensor or list (one text per example), a [batch, 2] one (text
    pairs), or a dict by the SavedModel's input names (text_a, text_b; context, endings).
    """

    def __init__(self, run_config, encoder, do_lower_case, vocabulary=None, **kwargs):
        super().__init__(**kwargs)
        self.run_config = dict(run_config)
        self.encoder_config = encoder
        self.do_lower_case = bool(do_lower_case)
        fields = {f.name for f in dataclasses.fields(RunConfig)}
        config = RunConfig(**{k: None if k in INPUT_PATHS else v
                              for k, v in self.run_config.items() if k in fields})
        registry = plugins.registry()
        self.task = copy.copy(registry.task(config.task))
        configure_task(self.task, config)
        self.serving = keras_output(self.task, registry)
        self.max_seq_length = config.max_seq_length
        self.input_names = tuple(self.serving.text_inputs(self.task))
        backbone = keras.saving.deserialize_keras_object(encoder)
        head_spec = registry.head(config.head or self.task.default_head)
        self.task_model = build_task_model(
            self.task, head_spec, backbone, config.head_options, config.seed_of("head_init"),
            sample_inputs=dummy_inputs(registry.kind_of(self.task), config.max_seq_length))
        # The vocabulary travels as an asset of the .keras file (load_assets), not its config.
        self.tokenizer = None
        if vocabulary is not None:
            self._set_vocabulary(vocabulary)
        self.built = True  # every weight exists now; Keras loads a file's weights into them

    @classmethod
    def from_run(cls, run):
        """The model of a LoadedRun (kerasbert/export/saved_model.py), its weights copied."""
        model = cls(run.config.to_dict(), keras.saving.serialize_keras_object(run.model.backbone),
                    run.tokenizer.do_lower_case, vocabulary=run.tokenizer.vocab)
        model.task_model.set_weights(run.model.get_weights())
        return model

    def text_inputs(self, inputs):
        """{input name: string tensor} from what a caller passes."""
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise InputError(f"the {self.task.name} model takes {', '.join(self.input_names)}"
                                 f"; missing {', '.join(missing)}")
            return {n: tf.convert_to_tensor(inputs[n], tf.string) for n in self.input_names}
        texts = tf.convert_to_tensor(inputs, tf.string)
        if len(self.input_names) == 1:
            return {self.input_names[0]: tf.reshape(texts, [-1])}
        if texts.shape.rank == 2 and self.input_names == ("text_a", "text_b"):
            return {"text_a": texts[:, 0], "text_b": texts[:, 1]}
        raise InputError(f"the {self.task.name} model takes {', '.join(self.input_names)}: "
                         "pass a dict by those names")

    def outputs(self, inputs, training=False):
        """The SavedModel's serving_default outputs (probabilities and label, score, ...)."""
        encoded = _trim_padding(self.serving.encode(self.tokenizer, self.text_inputs(inputs),
                                                    self.max_seq_length))
        return self.serving.outputs(self.task, self.task_model(encoded, training=training))

    def __call__(self, inputs, *args, **kwargs):
        # Keras takes only tensors as positional inputs: a list of str becomes one here.
        if isinstance(inputs, dict):
            inputs = {k: tf.convert_to_tensor(v, tf.string) for k, v in inputs.items()}
        elif not tf.is_tensor(inputs):
            inputs = tf.convert_to_tensor(inputs, tf.string)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=False):
        outputs = self.outputs(inputs, training=training)
        return next(outputs[name] for name in ANSWERS if name in outputs)

    def _set_vocabulary(self, vocabulary):
        self.tokenizer = _tokenizer(vocabulary, self.do_lower_case)

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, VOCAB), "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in self.tokenizer.vocab))

    def load_assets(self, dir_path):
        self._set_vocabulary(read_vocab(os.path.join(dir_path, VOCAB)))

    def get_config(self):
        return {**super().get_config(), "run_config": self.run_config,
                "encoder": self.encoder_config, "do_lower_case": self.do_lower_case}
