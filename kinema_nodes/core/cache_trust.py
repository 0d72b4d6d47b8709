"""Trusting only the compiled code this install wrote (issue #32, item 3).

The cache folder (`cache_folder.cache_root`) holds compiled code that is loaded and run:
numba's index and data files (pickles, unpickled by numba), PyRoki's JAX exports, and JAX's
compiled XLA executables. A file planted there, or copied in from elsewhere, would run as the
user. So every file Kinema writes there is signed, and nothing is loaded unless its signature
checks out:

- **a keyed hash** (HMAC-SHA256) with a per-install secret key: 32 random bytes in
  `<cache folder>.key` beside the cache folder (not in it: copying or syncing the cache folder
  does not carry the key), created 0600 and refused unless owned by this user and readable by
  nobody else. A signature covers the entry's name as well as its bytes, so a signed entry
  moved onto another entry's name is refused too. The check is made on the bytes in memory,
  and only those bytes are deserialised: nothing can be swapped between check and load.
- **ownership and permissions** of the cache folder, as pip and Python's bytecode cache do: a
  folder owned by another user is refused (no disk cache this session, one warning: Kinema
  compiles in memory); one of ours that others may write into is made private (0700), with one
  warning, and whatever it holds is then only loaded if signed.

Why both: the keyed hash alone is what catches a file planted by *this* user's tools (an
archive unpacked into the folder, a cache synced from another machine, a planted pickle), which
no ownership check can; the ownership check keeps other users from reading or replacing the key
beside a shared folder and from filling it with entries we would only delete again.

An unsigned or mismatched entry is deleted and rebuilt, and said once per process
(`note_untrusted`). Cost: one HMAC over bytes that are read anyway (about 1 ms per MB); the
key is read once per process.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import threading
from pathlib import Path

from .cache_folder import cache_root

#: A signed file starts with this, then the 32-byte HMAC, then the content as the writer made it.
SIGNED_MAGIC = b"KINEMA-SIGNED-1\n"
KEY_BYTES = 32
_DIGEST = hashlib.sha256

_lock = threading.Lock()
_keys: dict[str, bytes | None] = {}  # key file path -> key (None: refused; the reason was said)
_said: set[str] = set()


def _say_once(topic: str, message: str) -> None:
    if topic in _said:
        return
    _said.add(topic)
    from .errors import say

    say(f"kinema-nodes: {message}")


def key_path(root: Path | None = None) -> Path:
    """Where the install's secret key lives: beside the cache folder, `<folder name>.key`."""
    root = cache_root() if root is None else Path(root)
    return root.parent / f"{root.name}.key"


def _posix() -> bool:
    return hasattr(os, "geteuid")


def folder_refusal(folder: Path) -> str | None:
    """Why compiled code must not be kept in or loaded from `folder`, or None when it may.

    Made (0700) when missing. Owned by another user: refused. Ours but writable by group or
    others: made 0700, said once; its entries are still only loaded when signed."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = folder.stat()
    except OSError as exc:
        return f"the cache folder {folder} cannot be used ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return f"the cache folder {folder} is not a folder"
    if not _posix():
        return None  # Windows: a per-user profile folder; the signatures still apply
    if info.st_uid != os.geteuid():
        return f"the cache folder {folder} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        try:
            os.chmod(folder, stat.S_IMODE(info.st_mode) & 0o700)
        except OSError as exc:
            return f"the cache folder {folder} is writable by other users and cannot be made private ({exc.strerror or exc})"
        _say_once(f"tightened:{folder}", f"the cache folder {folder} was writable by other users; made it private (0700), "
                                         "and compiled code in it is loaded only if this install signed it")
    return None


def _read_key(path: Path) -> tuple[bytes | None, str | None]:
    """(key, None), or (None, why it cannot be used), or (None, None) when there is none."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"the cache key {path} cannot be read ({exc.strerror or exc})"
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None, f"the cache key {path} is not a regular file"
        if _posix() and info.st_uid != os.geteuid():
            return None, f"the cache key {path} belongs to another user (uid {info.st_uid})"
        key = os.read(descriptor, KEY_BYTES + 1)
    finally:
        os.close(descriptor)
    if _posix() and info.st_mode & 0o077:
        return None, "exposed"
    if len(key) != KEY_BYTES:
        return None, "short"
    return key, None


def _make_key(path: Path) -> None:
    """Write a new key whole (a temporary, then a hard link: never a half-written key, and never
    over one another process made meanwhile)."""
    import tempfile

    descriptor, temporary = tempfile.mkstemp(prefix=".kinema-key-", dir=path.parent)  # 0600
    try:
        os.write(descriptor, secrets.token_bytes(KEY_BYTES))
        os.fsync(descriptor)
        os.close(descriptor)
        descriptor = -1
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it first: theirs is read back
        except OSError:
            if not path.exists():
                os.replace(temporary, path)  # a filesystem without hard links
    finally:
        if descriptor >= 0:
            os.close(descriptor)
        try:
            os.unlink(temporary)
        except OSError:
            pass


def install_key() -> bytes | None:
    """The install's secret key (made on first use), or None when the cache folder or the key
    cannot be trusted; then compiled code is neither loaded from disk nor kept there, and why
    is said once."""
    root = cache_root()
    path = key_path(root)
    with _lock:
        if str(path) in _keys:
            return _keys[str(path)]
        key = None
        why = folder_refusal(root)
        if why is None:
            try:
                key, why = _read_key(path)
                if key is None and why in (None, "exposed", "short"):
                    if why is not None:
                        _say_once(f"rekey:{path}", f"the cache key {path} was {'readable by other users' if why == 'exposed' else 'damaged'}; "
                                                   "made a new one (compiled code is rebuilt once)")
                        path.unlink()
                    _make_key(path)
                    key, why = _read_key(path)
                    if key is None and why in ("exposed", "short"):
                        why = f"the cache key {path} could not be made private"
            except OSError as exc:
                key, why = None, f"the cache key {path} cannot be made ({exc.strerror or exc})"
        if key is None:
            _say_once(f"refused:{path}", f"{why}; compiled code is not loaded from or kept on disk this session")
        _keys[str(path)] = key
        return key


def forget_keys() -> None:
    """Forget the keys read in this process (tests switch cache folders; a new one is read)."""
    with _lock:
        _keys.clear()
        _said.clear()


def _mac(key: bytes, name: str, content: bytes) -> bytes:
    mac = hmac.new(key, name.encode("utf-8", "surrogateescape") + b"\0", _DIGEST)
    mac.update(content)
    return mac.digest()


def mac_hex(name: str, content: bytes) -> str | None:
    """The hex HMAC of `content` under `name`, or None when there is no trusted key."""
    key = install_key()
    return None if key is None else _mac(key, name, content).hex()


def sign(name: str, content: bytes) -> bytes | None:
    """`content` as a signed file for the entry `name` (None when there is no trusted key)."""
    key = install_key()
    if key is None:
        return None
    return SIGNED_MAGIC + _mac(key, name, content) + content


def unsign(name: str, data: bytes) -> bytes | None:
    """The content of a signed file for `name`, or None unless this install signed exactly it."""
    key = install_key()
    head = len(SIGNED_MAGIC)
    if key is None or not data.startswith(SIGNED_MAGIC) or len(data) < head + 32:
        return None
    content = data[head + 32:]
    return content if hmac.compare_digest(data[head:head + 32], _mac(key, name, content)) else None


def note_untrusted(what: str, path) -> None:
    """Say once per process and kind of entry that one was not this install's and is rebuilt."""
    _say_once(f"untrusted:{what}", f"{what} {path} was not written by this install (unsigned or changed); deleted, rebuilding it")


def read_regular(path) -> bytes:
    """The bytes of a regular file; a FIFO, device or socket in the cache folder raises OSError
    at once (opened without blocking, checked with fstat) instead of hanging the read."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(descriptor)


def is_regular(path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def discard(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
