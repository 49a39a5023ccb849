"""Registers kerasbert's own tasks through the same hook third-party plugins use."""

from kerasbert.hookspecs import hookimpl
from kerasbert.tasks import conll, glue, own_files, squad, swag


@hookimpl
def kerasbert_tasks():
    return [*glue.TASKS.values(), *squad.TASKS.values(), swag.TASK, conll.TASK,
            *own_files.all_tasks()]
