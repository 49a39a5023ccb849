"""What every own-files task shares: the files of its splits (--train_file,
--validation_file, --test_file, else `<split>.<ext>` in --data_dir or the bundled sample),
each read once per run, and the label set decided before the encoder loads."""

import os

from kerasbert.errors import InputError, at
from kerasbert.tasks.base import split_file
from kerasbert.tasks.own_files.labels import check_known, label_names, sorted_labels

FILE_OPTIONS = ("data_dir", "train_file", "validation_file", "predict_file", "test_file",
                "label_list")


class OwnFiles:
    """Mixin of the generic tasks: splits train, dev, test read from the user's files."""

    dev_splits = ("dev",)
    test_splits = ("test",)
    extensions = (".csv", ".tsv", ".jsonl", ".json")
    use_tfds = False

    def configure_files(self, options):
        """Takes the file options (FILE_OPTIONS) out of `options`; returns the rest."""
        self.files = {name: options.pop(name, None) for name in FILE_OPTIONS}
        self._read = {}  # (path, split) -> examples: each file is read once per run
        return options

    def split_path(self, data_dir: str, split: str) -> str:
        names = [split + extension for extension in self.extensions]
        return split_file(data_dir, *names)

    def read_examples(self, data_dir: str, split: str):
        return self.read_file(self.split_path(data_dir, split), split)

    def read_file(self, path: str, split: str):
        key = (os.path.abspath(path), split)
        if key not in getattr(self, "_read", {}):
            self._read = getattr(self, "_read", {})
            self._read[key] = self.read_split_file(path, split)
        return self._read[key]

    def file_of(self, config, split: str) -> str:
        """The file the run reads `split` from."""
        flag = {"train": config.train_file, self.dev_splits[0]: config.dev_file,
                self.test_splits[0]: config.test_file}[split]
        return flag or self.split_path(config.data_dir or self.sample_dir(), split)

    def check_config(self, config) -> None:
        if config.use_tfds:
            raise InputError(f"--use_tfds: the {self.name} task reads your files "
                             "(--train_file, --validation_file, --test_file)")

    def data_options(self, config):
        """Reads every split the run uses now (bad input fails before the encoder loads);
        the label list (the training file's, sorted, unless --label_list) is kept in the
        run's config."""
        if not self.decides_labels:  # regression: no labels to decide
            for split in self.run_splits(config):
                self.read_file(self.file_of(config, split), split)
            return {}
        fixed = label_names(config.label_list)
        known, source = fixed, "--label_list"
        if fixed is None or config.do_train:
            train_path = self.file_of(config, "train")
            found = self.labels_of(self.read_file(train_path, "train"), train_path)
            if fixed is None:
                comma = next(((label, line) for label, line in found if "," in label), None)
                if comma:  # the run keeps its labels as --label_list, comma-separated
                    raise InputError(f"{at(train_path, comma[1])}label {comma[0]!r} has a "
                                     "comma; label names cannot (--label_list separates by it)")
                known, source = sorted_labels(label for label, _ in found), train_path
            else:
                for label, line in found:
                    check_known(label, fixed, train_path, line, source)
        for split in self.run_splits(config):
            if split == "train":
                continue
            path = self.file_of(config, split)
            for label, line in self.labels_of(self.read_file(path, split), path):
                check_known(label, known, path, line, f"the training file {source}"
                            if source != "--label_list" else source)
        self.label_list = known
        return {"label_list": ",".join(known)}

    def run_splits(self, config):
        return (["train"] if config.do_train else []) + (
            list(self.dev_splits) if config.do_eval else []) + (
            list(self.test_splits) if config.do_predict else [])
