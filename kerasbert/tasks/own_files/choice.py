"""multiple_choice: a context and its candidate endings per row of a user's CSV, TSV or
JSON Lines file (--context_column, --ending_columns, --label_column = the gold ending's
0-based index); features, metrics and predictions are SWAG's."""

import re

from kerasbert.errors import InputError, at
from kerasbert.tasks.base import bundled_sample
from kerasbert.tasks.own_files.files import OwnFiles
from kerasbert.tasks.own_files.table import column, read_table, value
from kerasbert.tasks.swag import ChoiceExample, SwagTask

ENDING = re.compile(r"ending\d+")


class ChoiceTask(OwnFiles, SwagTask):
    name = "multiple_choice"
    description = "pick one of several endings, from your CSV, TSV or JSON Lines files"
    option_names = ("context_column", "ending_columns", "label_column", "data_dir",
                    "train_file", "validation_file", "predict_file", "test_file", "label_list")
    decides_labels = False  # the label is an index into the row's endings
    sample_recipe = {"learning_rate": 5e-5, "train_batch_size": 16, "num_train_epochs": 3.0}

    def __init__(self):
        self.context_column = self.ending_columns = self.label_column = None
        self.files = {}

    def __repr__(self):
        return "ChoiceTask()"

    @property
    def can_stream(self) -> bool:
        return False

    def configure(self, context_column=None, ending_columns=None, label_column=None,
                  **options):
        options = self.configure_files(options)
        if options:
            raise InputError(f"{self.name}: unknown option(s) {', '.join(options)}")
        self.context_column, self.label_column = context_column, label_column
        self.ending_columns = ending_columns
        return self

    def check_config(self, config) -> None:
        OwnFiles.check_config(self, config)
        if config.label_list:
            raise InputError(f"--label_list={config.label_list}: --task={self.name}'s label "
                             "is the index of the right ending (--ending_columns)")

    def sample_dir(self) -> str:
        return bundled_sample(self.name)

    def read_split_file(self, path: str, split: str) -> list[ChoiceExample]:
        columns, rows = read_table(path)
        context = self.context_column or ("context" if "context" in columns else "sent1")
        column(path, columns, context, "--context_column")
        if self.ending_columns:
            endings = [c.strip() for c in self.ending_columns.split(",")]
            for name in endings:
                column(path, columns, name, "--ending_columns")
        else:
            endings = [c for c in columns if ENDING.fullmatch(c)]
        if len(endings) < 2:
            raise InputError(f"{at(path)}--ending_columns: at least two endings needed; the "
                             f"file has: {', '.join(map(repr, columns))}")
        labelled = split not in self.test_splits
        label = self.label_column or "label"
        if labelled:
            column(path, columns, label, "--label_column")
        examples = []
        for n, (line, row) in enumerate(rows):
            gold = None
            if labelled:
                raw = str(value(path, line, row, label)).strip()
                if not raw.isdigit() or int(raw) >= len(endings):
                    raise InputError(f"{at(path, line)}label {raw!r} is not the index of an "
                                     f"ending (0 to {len(endings) - 1})")
                gold = int(raw)
            examples.append(ChoiceExample(
                guid=f"{split}-{n}", text_a=str(value(path, line, row, context)),
                label=gold, endings=tuple(str(value(path, line, row, e)) for e in endings),
                example_id=str(n)))
        return examples

    def labels_of(self, examples, path):
        return []


TASK = ChoiceTask()
