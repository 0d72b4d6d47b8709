"""Where compiled solvers live on disk, and a small LRU for the ones in memory.

The folder is per user (`core.cache_folder.cache_root`, shared with the collision kernel) so a
new Blender session finds what the last one compiled.

An entry on disk is `magic`, one header line (what it was made for), the keyed hash
(HMAC-SHA256 with the install's secret key, `core.cache_trust`) of its name, header and
payload, then the payload, written atomically (`core.files`). `read_entry` checks the hash
before anything deserialises the payload: a bit-flipped, truncated or swapped entry (a payload
someone else wrote, with a plain SHA-256 that matches it) is deleted (so the caller rebuilds it,
once) and reported once on stderr, instead of failing on every run or running what it holds.
Without a trusted key (a cache folder of another user) nothing is read or written.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from ..cache_folder import cache_root
from ..lru import DEFAULT_LRU_SIZE, LRU

__all__ = ["DEFAULT_LRU_SIZE", "LRU", "cache_root"]


#: Entries already reported as corrupt in this process (each is said once).
_reported: set[str] = set()


def note(message: str) -> None:
    """One line on stderr (never stdout: the CLI's answer goes there)."""
    from ..errors import say

    say(f"kinema-nodes: {message}")


def write_entry(path: Path, magic: bytes, header: bytes, payload: bytes) -> bool:
    """Write a cache entry whole or not at all; False when the folder cannot take it (a
    read-only or full cache only costs the next session a compile)."""
    from ..files import OutputError, write_bytes

    from ..cache_trust import mac_hex

    mac = mac_hex(path.name, header + payload)
    if mac is None:
        return False
    digest = mac.encode() + b"\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(path, magic + header + digest + payload, "solver cache entry")
    except (OSError, OutputError):
        return False
    return True


def read_entry(path: Path, magic: bytes, header: bytes) -> bytes | None:
    """The payload of an entry made for `header`, or None: missing, made for something else
    (stale: removed quietly), or corrupt (removed, and said once)."""
    from ..cache_trust import mac_hex, read_regular

    try:
        data = read_regular(path)  # a FIFO or device planted there must not hang the read
    except FileNotFoundError:
        return None
    except OSError:
        if path.exists() or path.is_symlink():
            discard(path, "it is not a regular file")
        return None
    if data.startswith(magic) and not data.startswith(magic + header):
        discard(path)  # made for another robot, link set or library version: not damage
        return None
    start = len(magic) + len(header)
    digest_end = data.find(b"\n", start)
    if not data.startswith(magic + header) or digest_end != start + 64:
        discard(path, "its header is damaged")
        return None
    payload = data[digest_end + 1:]
    mac = mac_hex(path.name, header + payload)
    if mac is None:
        return None  # no trusted key: never load, never delete (said once by cache_trust)
    if not hmac.compare_digest(mac.encode(), data[start:digest_end]):
        discard(path, "its content does not match its keyed hash: damaged, or not written by this install")
        return None
    return payload


def discard(path: Path, why: str | None = None) -> None:
    """Delete a cache entry; with `why`, say once that it was corrupt and will be rebuilt."""
    try:
        path.unlink()
    except OSError:
        pass
    if why and str(path) not in _reported:
        _reported.add(str(path))
        note(f"solver cache entry {path} was corrupt ({why}); deleted, rebuilding it")
