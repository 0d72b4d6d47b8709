"""The command line, `kinema-nodes`: one module per subcommand (`info`, `solve`, `import_robot`,
`configs`, `bake`, `demo`), the shared parsing and output rules (`common`), the bake CSVs
(`csv_files`) and report pictures (`report`), and headless Blender (`headless`)."""

from .main import main, run

__all__ = ["main", "run"]
