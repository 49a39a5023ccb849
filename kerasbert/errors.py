"""The one exception type users see.

Anything the user can fix (a bad file, a bad flag, an unreadable checkpoint) is raised as
`InputError` with a message that names the file and line, or the flag. `kerasbert.main`
prints it as one line and exits non-zero; tracebacks are for bugs, not for bad input.
"""


class InputError(Exception):
    """A problem with the user's input: files, flags or checkpoints."""


def at(path, line=None):
    """Formats a location prefix: 'path:line: ' or 'path: '."""
    return f"{path}:{line}: " if line is not None else f"{path}: "


class TrainingError(Exception):
    """Training cannot go on (e.g. the loss became NaN); the last good checkpoint is kept."""
