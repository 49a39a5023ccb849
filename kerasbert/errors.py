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


def guarded(entry, reraise=lambda: False):
    """`entry` as a command's body: a user's error (InputError, TrainingError) becomes one
    line on stderr, `kerasbert: error: ...`, and the exit status 2 (bad input) or 1 (training
    stopped); anything else is a bug and keeps its traceback. `reraise()` true (e.g.
    --verbose) keeps the traceback of user errors too. Every kerasbert command uses this one
    guard, so they all fail the same way."""
    import functools
    import sys

    @functools.wraps(entry)
    def wrapper(*args, **kwargs):
        try:
            return entry(*args, **kwargs)
        except (InputError, TrainingError) as e:
            if reraise():
                raise
            print(f"kerasbert: error: {e}", file=sys.stderr)
            return 2 if isinstance(e, InputError) else 1

    return wrapper
