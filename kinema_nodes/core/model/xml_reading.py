"""The one XML reader: every XML file Kinema reads (URDF, SRDF, MJCF, xacro and what it includes).

A robot description never needs a DOCTYPE, and a DOCTYPE is where the harm is: entities that
expand without bound (billion laughs), parameter entities and external DTDs that name other
files or URLs. So a document with a DOCTYPE or an entity declaration is refused. The verdict
is made on the **decoded** text, not the bytes: ``<!DOCTYPE`` in UTF-16 or UTF-32 (with or
without a byte-order mark), or in an encoding the XML declaration names, has no ASCII bytes to
match, and slipped past a byte search. The encoding is found as XML 1.0 Appendix F says: the
byte-order mark, else the first four bytes (``<?xm`` in UTF-16/32 LE/BE), else the
declaration's ``encoding``; a document that does not decode in it is refused too.

Then lxml parses it with entities unresolved, no DTD loaded, no network and its size limits on.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from pathlib import Path

from ..errors import RobotFileError

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_SNIFF = {b"\x00\x00\x00<": "utf-32-be", b"<\x00\x00\x00": "utf-32-le", b"\x00<\x00?": "utf-16-be", b"<\x00?\x00": "utf-16-le",
          b"\x00\x00<\x00": "utf-32-le", b"\x00<\x00\x00": "utf-32-be"}
_DECLARED = re.compile(rb"""\A\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z][A-Za-z0-9._\-]{0,40})["']""")
_ENTITY = re.compile(r"<!\s*ENTITY", re.IGNORECASE)
_DTD = re.compile(r"<!\s*(DOCTYPE|ENTITY|ELEMENT|ATTLIST|NOTATION)", re.IGNORECASE)


def xml_encoding(data: bytes) -> str:
    """The encoding a document is in: its byte-order mark, its first bytes, its declaration, or UTF-8."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    sniffed = _SNIFF.get(data[:4])
    if sniffed is not None:
        return sniffed
    if data[:2] in (b"<\x00", b"\x00<"):  # UTF-16 without a declaration
        return "utf-16-le" if data[:1] == b"<" else "utf-16-be"
    declared = _DECLARED.match(data[:1024])
    return declared.group(1).decode("ascii").lower() if declared else "utf-8"


def decoded_xml(data: bytes, source, what: str = "XML") -> str:
    """The document's text, decoded as `xml_encoding` says; one line if it does not decode."""
    encoding = xml_encoding(data)
    try:
        wide = codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))
    except LookupError:
        raise RobotFileError(source, f"{what} is not valid XML: it declares the encoding '{encoding}', "
                                     "which is not known") from None
    marked = any(data.startswith(bom) for bom, _ in _BOMS) or data[:4] in _SNIFF or data[:2] in (b"<\x00", b"\x00<")
    if wide and not marked:
        # declared UTF-16/32 over single-byte text: a parser might read it either way
        raise RobotFileError(source, f"{what} is not valid XML: it declares '{encoding}' but is not written in it")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise RobotFileError(source, f"{what} is not valid XML: not {encoding} text (at byte {exc.start})") from None
    return text.removeprefix("\ufeff")


def check_no_doctype(data: bytes, source, what: str = "XML") -> str:
    """Refuse a document with a DOCTYPE or entity declaration, judged on its decoded text
    (any encoding). Returns the decoded text."""
    text = decoded_xml(data, source, what)
    found = _DTD.search(text)
    if found:
        kind = "declares XML entities" if _ENTITY.search(text) else "has a DOCTYPE"
        raise RobotFileError(source, f"{what} {kind}; refused (robot files never need a DOCTYPE or entities, "
                                     "and they can expand without bound or read other files)")
    return text


def parse_xml(data: bytes, source, what: str = "XML"):
    """The root element of `data`, after `check_no_doctype`, parsed by lxml with entities
    unresolved, no DTD, no network and lxml's size limits on; one line if it is not XML."""
    from lxml import etree

    check_no_doctype(data, source, what)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_blank_text=True)
    try:
        return etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise RobotFileError(source, f"{what} is not valid XML: {' '.join(str(exc).split())[:300]}") from None


def read_xml_file(path: str | Path, limit: int, what: str = "XML", source=None) -> bytes:
    """A file's bytes for an XML reader: a regular file (a FIFO would block, /dev/zero never
    end: refused from `stat`, never opened) of at most `limit` bytes, with no DOCTYPE."""
    path = Path(path)
    source = path if source is None else source
    try:
        info = os.stat(path)
    except OSError as exc:
        raise RobotFileError(source, f"{what} '{path}' cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise RobotFileError(source, f"{what} '{path}' is not a regular file (a folder, device, pipe or socket); refused")
    if info.st_size > limit:
        raise RobotFileError(source, f"{what} '{path}' is {info.st_size / 1e6:.0f} MB; refusing files over {limit / 1e6:.0f} MB")
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise RobotFileError(source, f"{what} '{path}' cannot be read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise RobotFileError(source, f"{what} '{path}' grew past {limit / 1e6:.0f} MB while read; refused")
    check_no_doctype(data, source, what)
    return data
