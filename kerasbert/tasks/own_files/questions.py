"""question_answering: SQuAD-format JSON files (--train_file, --validation_file), v1.1 or,
with --version_2_with_negative (google-research/bert's flag), v2.0 with unanswerable
questions; everything else is the squad_v1 / squad_v2 task's."""

from kerasbert.errors import InputError
from kerasbert.tasks.own_files.files import OwnFiles
from kerasbert.tasks.squad.features import OPTIONS
from kerasbert.tasks.squad.task import SquadTask


class QuestionTask(OwnFiles, SquadTask):
    option_names = (*OPTIONS, "version_2_with_negative", "data_dir", "train_file",
                    "validation_file", "predict_file", "test_file", "label_list")
    test_splits = ()
    decides_labels = False
    extensions = (".json",)

    def __init__(self):
        super().__init__(version_2=False)
        self._as_version(False)

    def _as_version(self, version_2):
        SquadTask.__init__(self, version_2)
        self.name = "question_answering"
        self.description = ("extractive question answering on SQuAD-format JSON "
                            "(--version_2_with_negative: SQuAD 2.0)")

    def __repr__(self):
        return "QuestionTask()"

    def configure(self, version_2_with_negative=None, **options):
        options = self.configure_files(options)
        if version_2_with_negative is not None and bool(version_2_with_negative) != self.version_2:
            kept = {name: getattr(self, name) for name in OPTIONS}
            self._as_version(bool(version_2_with_negative))
            options = {**kept, **options}
        return SquadTask.configure(self, **options)

    def check_config(self, config) -> None:
        OwnFiles.check_config(self, config)
        SquadTask.check_config(self, config)
        if config.label_list:
            raise InputError(f"--label_list={config.label_list}: --task={self.name} answers "
                             "with spans of the passage, it has no label names")

    def file_of(self, config, split):
        flag = config.train_file if split == "train" else config.dev_file
        return flag or SquadTask.split_path(self, config.data_dir or self.sample_dir(), split)

    def split_path(self, data_dir, split):
        return SquadTask.split_path(self, data_dir, split)

    def read_split_file(self, path, split):
        return SquadTask.read_file(self, path, split)

    def labels_of(self, examples, path):
        return []


TASK = QuestionTask()
