"""importer (Blender glue)."""

CLASSES = ()
