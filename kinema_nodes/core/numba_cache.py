"""numba's disk cache, signed: `njit` is `numba.njit(cache=True, ...)` except that every index
and data file numba writes is signed with the install's key (`core.cache_trust`), and a file is
unpickled only when its signature checks out. numba's own cache unpickles its index (`.nbi`)
and data (`.nbc`) files as it finds them, so a pickle planted in the cache folder would run.

The check is inside numba's read path (a subclass of its `IndexDataCacheFile`), on the bytes in
memory, so nothing is verified ahead and swapped afterwards, and no folder walk is paid at
start. An unsigned or changed file is deleted, said once per process, and numba compiles and
writes it again. Where numba's cache classes are not the ones this was written against, or no
trusted key exists, the kernel is compiled without a disk cache (slower starts, never unsafe).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import threading

from .cache_trust import discard, install_key, note_untrusted, read_regular, sign, unsign

_cache_class = None
_cache_reason: str | None = None


def _signed_cache_class():
    """numba's FunctionCache with a signing cache file, or None when numba's internals differ."""
    global _cache_class, _cache_reason
    if _cache_class is not None or _cache_reason is not None:
        return _cache_class
    try:
        from numba.core import caching

        base_file, base_cache = caching.IndexDataCacheFile, caching.FunctionCache
        for name in ("_load_index", "_load_data", "_open_for_write", "_data_path"):
            getattr(base_file, name)
    except (ImportError, AttributeError) as exc:
        _cache_reason = f"numba's cache classes differ from those Kinema signs ({exc})"
        return None

    class SignedIndexDataCacheFile(base_file):
        def _read_signed(self, path):
            try:
                data = read_regular(path)
            except FileNotFoundError:
                raise
            except OSError:
                data = b""  # a FIFO, device or socket: refused like any file this install did not sign
            content = unsign(os.path.basename(path), data)
            if content is None:
                discard(path)
                note_untrusted("the compiled-kernel cache file", path)
            return content

        def _load_index(self):
            try:
                content = self._read_signed(self._index_path)
            except OSError:
                return {}
            if content is None:
                return {}
            stream = io.BytesIO(content)
            version = pickle.load(stream)  # signed by this install: the same trust as numba's own file
            if version != self._version:
                return {}
            stamp, overloads = pickle.loads(stream.read())
            return overloads if stamp == self._source_stamp else {}

        def _load_data(self, name):
            content = self._read_signed(self._data_path(name))
            return None if content is None else pickle.loads(content)

        @contextlib.contextmanager
        def _open_for_write(self, filepath):
            buffer = io.BytesIO()
            yield buffer
            signed = sign(os.path.basename(filepath), buffer.getvalue())
            if signed is None:
                return  # no trusted key: nothing is kept
            with base_file._open_for_write(self, filepath) as handle:
                handle.write(signed)

    class SignedFunctionCache(base_cache):
        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = SignedIndexDataCacheFile(cache_path=self._cache_path, filename_base=self._impl.filename_base,
                                                        source_stamp=self._impl.locator.get_source_stamp())

    _cache_class = SignedFunctionCache
    return _cache_class


def njit(function, **options):
    """`numba.njit(**options)(function)` with the signed disk cache (see the module's docstring)."""
    import numba

    dispatcher = numba.njit(cache=False, **options)(function)
    if install_key() is None:
        return dispatcher  # the reason was said once by cache_trust
    cache_class = _signed_cache_class()
    if cache_class is None:
        from .cache_trust import _say_once

        _say_once("numba-internals", f"{_cache_reason}; the compiled kernel is not kept on disk")
        return dispatcher
    try:
        dispatcher._cache = _in_signed_folder(cache_class, dispatcher.py_func)
    except Exception:  # noqa: BLE001 - no locator for this file (a zip import...): compile in memory, as numba would refuse cache=True
        pass
    return dispatcher


_folder_lock = threading.Lock()


def _in_signed_folder(cache_class, py_func):
    """The signed cache of `py_func`, in the folder beside this install's key
    (`cache_folder.signed_folder("numba")`) whatever NUMBA_CACHE_DIR says. numba's locator reads
    its folder from `numba.config.CACHE_DIR` when the cache is made, so that is set for the
    moment and put back; the environment is never touched. (It once was, with setdefault: a
    child process given another KINEMA_CACHE_DIR, so another key, inherited this process's
    NUMBA_CACHE_DIR, judged every entry there foreign, deleted it and re-signed it with its own
    key, and the next process here said "not written by this install".)"""
    from numba.core import config

    from .cache_folder import signed_folder

    with _folder_lock:
        before = config.CACHE_DIR
        config.CACHE_DIR = str(signed_folder("numba"))
        try:
            return cache_class(py_func)
        finally:
            config.CACHE_DIR = before


def cache_files(dispatcher) -> tuple[str, str] | None:
    """(index path, folder) of a dispatcher's signed cache, for tests and diagnostics."""
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is None or not hasattr(cache_file, "_index_path"):
        return None
    return cache_file._index_path, cache_file._cache_path
