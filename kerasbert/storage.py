"""Paths on this machine or on any filesystem TensorFlow has (`gs://`, `s3://` with
tensorflow-io, `ram://`, `hdfs://`): the file operations of a run's outputs, one call each.

A local path goes through `os` (exact errno messages, atomic renames, no TensorFlow import:
a wrong local path fails in a blink); a path with a scheme goes through `tf.io.gfile`, as
google-research/bert and tf-models write to GCS. `os.path.join`/`split` are right for both
(they only handle "/"); `os.path.abspath` is not (it would make `gs://b/x` into
`<cwd>/gs:/b/x`), so callers use `absolute` instead.
"""

import os
import re
import shutil

from kerasbert.errors import InputError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Filesystems that `import tensorflow_io` registers with TensorFlow (gs:// is built in).
TENSORFLOW_IO_SCHEMES = ("s3", "az", "hdfs", "http", "https")


def scheme(path):
    """'gs' of gs://bucket/x; '' for a local path (file:// counts as local)."""
    match = _SCHEME.match(str(path))
    return "" if match is None or match.group(1) == "file" else match.group(1)


def is_local(path):
    return not scheme(path)


def local(path):
    """A local path without its file:// prefix."""
    path = str(path)
    return path[len("file://"):] if path.startswith("file://") else path


def absolute(path):
    """os.path.abspath for a local path; a path with a scheme as given."""
    return os.path.abspath(local(path)) if is_local(path) else str(path)


def _gfile():
    import tensorflow as tf  # only for a path with a scheme

    return tf.io.gfile


def check_scheme(path, flag):
    """An InputError `{flag}={path}: TensorFlow has no filesystem for gs:// (...)` unless
    TensorFlow can read and write paths of `path`'s scheme: found before anything is
    written (TensorFlow itself says so only at the first write, deep in a traceback)."""
    if is_local(path):
        return
    import tensorflow as tf

    try:
        tf.io.gfile.exists(path)
    except tf.errors.UnimplementedError:
        hint = (" (pip install tensorflow-io: it adds it)" if scheme(path) in TENSORFLOW_IO_SCHEMES
                else "")
        raise InputError(f"{flag}={path}: TensorFlow has no filesystem for "
                         f"{scheme(path)}://{hint}") from None
    except tf.errors.OpError as e:  # no credentials, no such bucket, no network
        raise InputError(f"{flag}={path}: cannot reach it ({_first_line(e)})") from None


def _first_line(error):
    message = getattr(error, "message", None) or str(error)
    return (message.strip().splitlines() or [type(error).__name__])[0][:200]


def exists(path):
    return os.path.exists(local(path)) if is_local(path) else _gfile().exists(path)


def isdir(path):
    return os.path.isdir(local(path)) if is_local(path) else _gfile().isdir(path)


def isfile(path):
    if is_local(path):
        return os.path.isfile(local(path))
    gfile = _gfile()
    return gfile.exists(path) and not gfile.isdir(path)


def listdir(path):
    """The names in a folder (no trailing "/" for sub-folders, whatever the filesystem)."""
    if is_local(path):
        return os.listdir(local(path))
    return [name.rstrip("/") for name in _gfile().listdir(path)]


def getsize(path):
    return os.path.getsize(local(path)) if is_local(path) else _gfile().stat(path).length


def stamp(path):
    """(size, modification time in ns) of a file, to notice that it changed."""
    if is_local(path):
        info = os.stat(local(path))
        return info.st_size, info.st_mtime_ns
    info = _gfile().stat(path)
    return info.length, info.mtime_nsec


def glob(pattern):
    import glob as globbing

    return globbing.glob(local(pattern)) if is_local(pattern) else _gfile().glob(pattern)


def makedirs(path):
    """The folder and its parents; an OSError (local) or tf.errors.OpError as raised."""
    if is_local(path):
        os.makedirs(local(path), exist_ok=True)
    else:
        _gfile().makedirs(path)


def remove(path):
    if is_local(path):
        os.remove(local(path))
    else:
        _gfile().remove(path)


def rmtree(path):
    if is_local(path):
        shutil.rmtree(local(path))
        return
    import tensorflow as tf

    try:
        tf.io.gfile.rmtree(path)
    except tf.errors.NotFoundError:  # ram:// lists names by prefix and trips over its own
        for folder, _, files in list(tf.io.gfile.walk(path)):  # listing: file by file
            for name in files:
                if tf.io.gfile.exists(os.path.join(folder, name)):
                    tf.io.gfile.remove(os.path.join(folder, name))
        for folder, _, _ in reversed(list(tf.io.gfile.walk(path))):
            if tf.io.gfile.exists(folder):
                tf.io.gfile.remove(folder)


def rename(source, target):
    """Replaces `target` by `source`: an atomic rename(2) locally; on an object store
    (gs://) a copy then a delete, which a reader may see half done."""
    if is_local(source) and is_local(target):
        os.replace(local(source), local(target))
    else:
        _gfile().rename(source, target, overwrite=True)


def move_folder(source, target):
    """Moves a folder to a new name: rename(2) locally (it fails if `target` exists); with a
    scheme, file by file (an object store has no folders to rename, only names: a copy of
    every file, then the source removed), which a reader may see half done."""
    if is_local(source) and is_local(target):
        os.rename(local(source), local(target))
        return
    gfile = _gfile()
    for folder, _, files in gfile.walk(source):
        inside = os.path.join(target, folder[len(source):].strip("/"))
        gfile.makedirs(inside)
        for name in files:
            file = os.path.join(folder, name)
            if gfile.exists(file):  # ram:// lists by name prefix: assets.extra/x as assets/.extra
                gfile.copy(file, os.path.join(inside, name), overwrite=True)
    rmtree(source)


def copy(source, target):
    if is_local(source) and is_local(target):
        shutil.copyfile(local(source), local(target))
    else:
        _gfile().copy(source, target, overwrite=True)


def open_file(path, mode="r", encoding="utf-8"):
    """open() locally; tf.io.gfile.GFile with a scheme (text modes decode as UTF-8)."""
    if is_local(path):
        return open(local(path), mode, **({} if "b" in mode else {"encoding": encoding}))
    return _gfile().GFile(path, mode)


def reason(error):
    """The words of an error of either kind: an OSError's strerror, TensorFlow's message."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return _first_line(error)


def is_io_error(error):
    """An OSError, or TensorFlow's error for a path with a scheme (tf.errors.OpError)."""
    if isinstance(error, OSError):
        return True
    import sys

    tf = sys.modules.get("tensorflow")  # never imported just to classify an error
    return tf is not None and isinstance(error, tf.errors.OpError)


def is_not_found(error):
    if isinstance(error, FileNotFoundError):
        return True
    import sys

    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(error, tf.errors.NotFoundError)
