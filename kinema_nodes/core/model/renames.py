"""Links renamed in a robot's URDF text: a rig's bones are its links, named as the links, so a
bone renamed in Blender renames its link in the URDF the rig carries (blender/renames.py:
`follow_renames`), and the robot read back from it names its links as the rig names its bones."""

from __future__ import annotations

from pathlib import Path

#: (element, attribute) pairs that name a link in a URDF: the link itself, a joint's parent and
#: child, and the extensions that point at a link (Gazebo's reference).
_LINK_ATTRIBUTES = (("link", "name"), ("parent", "link"), ("child", "link"), ("gazebo", "reference"))


def rename_links(text: str, renames: dict[str, str], source: str | Path = "rig.urdf") -> str:
    """`text` (URDF) with each link named in `renames` renamed, wherever the URDF names it."""
    from lxml import etree

    from .xml_reading import parse_xml

    root = parse_xml(text.encode("utf-8"), Path(source), "URDF")
    for element in root.iter():
        for tag, attribute in _LINK_ATTRIBUTES:
            if element.tag == tag and element.get(attribute) in renames:
                element.set(attribute, renames[element.get(attribute)])
    return etree.tostring(root, encoding="unicode")
