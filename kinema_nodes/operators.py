"""operators (Blender glue)."""

CLASSES = ()
