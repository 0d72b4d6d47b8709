"""handlers (Blender glue)."""

CLASSES = ()
