"""core.graph: a node tree as plain data. Siblings use `registry` (every node kind, once:
its Blender name, sockets, Add-menu place and stage), `spec` (`GraphSpec`, `NodeSpec`,
`LinkSpec`, `validate`) and `program` (`compile_program`, `Program.run`, `FrameInputs`,
`stage_function`). The evaluator snapshots a Blender tree into a `GraphSpec`; everything
after that is here and testable without Blender."""

from .registry import NODES as NODES, bl_idname as bl_idname, kind_of as kind_of
from .spec import GraphSpec as GraphSpec, LinkSpec as LinkSpec, NodeSpec as NodeSpec, validate as validate
