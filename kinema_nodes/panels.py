"""panels (Blender glue)."""

CLASSES = ()
