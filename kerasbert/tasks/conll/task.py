"""The conll2003 task: CoNLL-2003 English NER over the stages of this package (reader,
features, decoding, metrics, serving)."""

import os

from kerasbert import run_folder
from kerasbert.analysis import stats
from kerasbert.errors import InputError
from kerasbert.metrics import finite_value
from kerasbert.tasks.base import TAGGING, Features, Task, bundled_sample, split_file
from kerasbert.tasks.conll.decoding import predict_word_tags
from kerasbert.tasks.conll.features import count_rows, featurize_sentences
from kerasbert.tasks.conll.metrics import (
    entity_counts,
    entity_metrics,
    write_conll_predictions,
)
from kerasbert.tasks.conll.reader import (
    LABELS,
    SCHEMES,
    TFDS_NER_TAGS,
    TFDS_SPLITS,
    Sentence,
    SchemeCheck,
    fix_scheme,
    iter_conll_file,
    read_conll_file,
)



class ConllTask(Task):
    """CoNLL-2003 English NER, the BERT paper's section 4.3 / 5.3 task."""

    name = "conll2003"
    kind = TAGGING
    default_head = "tagger"
    label_list = LABELS
    main_metric = "f1"
    dev_splits = ("valid",)
    test_splits = ("test",)
    scored_test_splits = ("test",)  # the official testb, gold-tagged: the paper's number
    # The paper gives no NER-specific recipe: like every fine-tuning task, NER is tuned on dev
    # over its Appendix A.3 grid (batch 16 / 32, lr 5e-5 / 3e-5 / 2e-5, 2 / 3 / 4 epochs).
    # The defaults are one point of that grid: batch 32, lr 5e-5, 3 epochs.
    default_learning_rate = 5e-5
    default_train_batch_size = 32
    default_num_train_epochs = 3.0
    # On the 200-sentence bundled sample the paper recipe is only 21 steps, too few for
    # MiniLM to leave the all-"O" solution (dev F1 ~0); this gives ~0.9 there.
    sample_recipe = {"learning_rate": 1e-4, "train_batch_size": 16, "num_train_epochs": 6.0}
    option_names = ("document_context",)
    document_context = "0"  # --document_context: pieces of context per row, or "max"

    def __init__(self, scheme: str = "auto"):
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}")
        self.scheme = scheme
        self.schemes_found: dict[str, str] = {}  # split -> "IOB1" / "IOB2", for reports

    def __repr__(self):
        return "ConllTask()"

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", *self.dev_splits, *self.test_splits)

    def _check_split(self, split):
        if split not in self.splits:
            raise InputError(f"{self.name}: unknown split {split!r}; expected one of "
                             f"{', '.join(self.splits)}")

    def split_path(self, data_dir: str, split: str) -> str:
        """`<data_dir>/<split>.txt`, which must exist."""
        self._check_split(split)
        return split_file(data_dir, f"{split}.txt")

    def read_examples(self, data_dir: str, split: str) -> list[Sentence]:
        return self.read_file(self.split_path(data_dir, split), split)

    def read_file(self, path: str, split: str) -> list[Sentence]:
        """Reads one CoNLL-2003 file as `split` (--train_file, --predict_file)."""
        sentences, self.schemes_found[split] = read_conll_file(path, split, self.scheme)
        return sentences

    def iter_file(self, path: str, split: str):
        """The sentences of one file one at a time, IOB2, validated as read_file validates
        them; the tag scheme is checked after the last one (--stream_train_data's counting
        pass reads to the end, see kerasbert/data/streaming.py)."""
        check = SchemeCheck(path, self.scheme)
        yield from iter_conll_file(path, split, check)
        self.schemes_found[split] = check.finish()

    def count_rows(self, examples, tokenizer, max_seq_length: int) -> int:
        """Feature rows of `examples` (a long sentence makes several), for streaming."""
        return count_rows(examples, tokenizer, max_seq_length)

    def sample_dir(self) -> str:
        return bundled_sample("conll2003")

    def configure(self, document_context=None, **options) -> "ConllTask":
        if options:
            raise InputError(f"{self.name}: unknown option(s) {', '.join(options)}; expected "
                             "document_context")
        if document_context is not None:  # RunConfig checked it: "max" or digits
            value = str(document_context)
            self.document_context = value if value == "max" else str(int(value))
        return self

    def check_config(self, config) -> None:
        # (N <= --max_seq_length is RunConfig's check.)
        value = self.document_context
        if value != "0" and config.use_tfds:
            raise InputError(f"--document_context={value}: TFDS conll2003 has no -DOCSTART- "
                             "documents to take context from; read the CoNLL files "
                             "(--data_dir) instead of --use_tfds")

    def keeps_together(self, example, following) -> bool:
        """With document context, a document's sentences are featurized together (each
        row's context comes from its neighbours), also when streamed."""
        return (self.document_context != "0" and example.document is not None
                and example.document == following.document)

    def read_tfds(self, split: str, data_dir: str | None = None) -> list[Sentence]:
        """Reads a split of a prepared TFDS `conll2003` (train / dev / test; no downloads)."""
        import tensorflow_datasets as tfds  # heavy; only when asked for

        self._check_split(split)
        tfds_split = TFDS_SPLITS[split]
        where = f"tfds conll2003 ({tfds_split})"
        try:
            dataset = tfds.load("conll2003", split=tfds_split, data_dir=data_dir, download=False)
        except (AssertionError, OSError) as e:
            raise InputError(
                f"TFDS conll2003 ({tfds_split}) is not prepared in "
                f"{data_dir or 'the default TFDS folder'}; prepare it on a machine with network "
                f"access (tfds build conll2003) and copy the folder, or point --data_dir at the "
                f"CoNLL train/valid/test.txt files instead ({e})") from None
        sentences = []
        for n, row in enumerate(tfds.as_numpy(dataset)):
            words = [w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in row["tokens"]]
            tags = [TFDS_NER_TAGS[int(i)] for i in row["ner"]]
            if words:  # "line" = the example's number in the split, for messages
                sentences.append((words, tags, [n + 1] * len(words)))
        if not sentences:
            raise InputError(f"{where}: no sentences")
        self.schemes_found[split] = fix_scheme(sentences, where, self.scheme)
        return [Sentence(guid=f"{split}-{n}", text_a=" ".join(w), label=tuple(t),
                         words=tuple(w), line=lines[0])
                for n, (w, t, lines) in enumerate(sentences)]

    def featurize(self, examples, tokenizer, max_seq_length: int) -> Features:
        return featurize_sentences(examples, tokenizer, max_seq_length, self.label_list,
                                   self.document_context)

    def predict_tags(self, outputs, features: Features) -> list[list[str]]:
        return predict_word_tags(outputs, features, self.label_list)

    def evaluate(self, outputs, features: Features, output_dir: str | None = None,
                 split: str = "valid") -> dict[str, float]:
        """Entity P/R/F1 of a labelled split; writes `<split>_predictions.txt` to output_dir."""
        predicted = self.predict_tags(outputs, features)
        if output_dir is not None:
            write_conll_predictions(os.path.join(output_dir, f"{split}_predictions.txt"),
                                    features.examples, predicted)
        return entity_metrics([s.label for s in features.examples], predicted)

    def per_example_scores(self, run_dir: str, metric: str, split: str):
        """Entity F1: the run's `<split>_predictions.txt` scored per sentence (true
        positives, predicted, gold entities), when the file scores to the run's own F1 (it
        is then its final predictions)."""
        if metric != "f1":
            return None
        sentences = run_folder.read_tagging_predictions(run_dir, split)
        if not sentences:
            return None
        counts = entity_counts(sentences)
        recorded = finite_value(run_folder.read_metrics(run_dir), metric)
        if recorded is None or abs(
                stats.f1_statistic(counts.sum(axis=0), len(counts)) - recorded) >= 1e-6:
            return None
        return counts, "f1"

    def serving_answer(self, run):
        """The served tags are aligned and decoded in the graph as here (serving.py)."""
        from kerasbert.tasks.conll import serving  # lazy: TF and its text ops

        return serving.serving_answer(self, run)

    def write_predictions(self, outputs, features: Features, output_dir: str, split: str) -> str:
        """Writes `<split>_predictions.txt` (`word gold predicted`, or `word predicted`)."""
        path = os.path.join(output_dir, f"{split}_predictions.txt")
        return write_conll_predictions(path, features.examples,
                                       self.predict_tags(outputs, features))


TASK = ConllTask()
