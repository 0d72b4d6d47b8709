"""blender: everything that touches Blender's data, and translates only: numbers come from
`core`, and this folder copies them into armatures, bones, F-curves and cameras.

Siblings (ui/, nodes/, cli/, the evaluator) use `edit` (the one rig-editing API: add/remove a
target, snap, key the Target Bone, swivel, find solutions), `rig` (the robot a rig carries and
its joint values), `build` (URDF import), `baking`, `animation`, `groups`, `presets`, `render`,
`limits` and `handlers`. Names with a leading underscore stay inside this folder.
"""

import sys as _sys

if "bpy" not in _sys.modules:  # a script, register() or the CLI is about to load Blender's module
    from ..core.solve import wait_for_kernel_build as _wait_for_kernel_build

    _wait_for_kernel_build()
