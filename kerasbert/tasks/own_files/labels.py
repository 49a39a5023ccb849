"""Labels of a user's files: their set (taken from the training file, sorted, unless
--label_list fixes it), one type per file, and every later split's labels within the set."""

from kerasbert.errors import InputError, at


def label_names(flag_value) -> tuple[str, ...] | None:
    """--label_list ("a,b,c") as names; None when not given."""
    if not flag_value:
        return None
    names = tuple(name.strip() for name in str(flag_value).split(","))
    if any(not name for name in names) or len(set(names)) != len(names):
        raise InputError(f"--label_list={flag_value}: expected distinct, non-empty names "
                         "separated by commas")
    return names


def label_kind(value) -> str:
    """"number" or "string": what a label looks like (mixed kinds in one file are refused)."""
    if isinstance(value, bool):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    try:
        float(value)
    except (TypeError, ValueError):
        return "string"
    return "number"


class LabelTypes:
    """Refuses a file whose labels mix numbers and strings, at the first line that does."""

    def __init__(self, path):
        self.path, self.first = path, None  # (kind, line, value) of the first label

    def add(self, value, line):
        kind = label_kind(value)
        if self.first is None:
            self.first = (kind, line, value)
        elif kind != self.first[0]:
            _, first_line, first_value = self.first
            raise InputError(f"{at(self.path, line)}label {value!r} is a {kind}, but line "
                             f"{first_line}'s label {first_value!r} is a {self.first[0]}; "
                             "labels of one file are all names or all numbers")


def as_name(value) -> str:
    """A label as the name it is kept under: JSON's 1 and CSV's "1" are both "1"."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def sorted_labels(names) -> tuple[str, ...]:
    """The training file's labels in order: numerically when all are integers (2 before 10),
    else as strings (HuggingFace's run_glue.py sorts them too)."""
    names = set(names)
    try:
        return tuple(sorted(names, key=int))
    except ValueError:
        return tuple(sorted(names))


def check_known(label: str, known, path, line, source: str):
    """An InputError unless `label` is one of `known` (the training file's labels, or
    --label_list)."""
    if label not in known:
        raise InputError(f"{at(path, line)}label {label!r} is not among {source}'s labels "
                         f"({', '.join(known)}); fix the file or list it in --label_list")
