"""The package's shape: core without Blender, the add-on registering cleanly, the manifest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import kinema_nodes

ROOT = Path(kinema_nodes.__file__).resolve().parent


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_core_imports_and_computes_with_blender_blocked():
    result = _run("""
        import sys
        for name in ("bpy", "mathutils", "bmesh", "jax", "pyroki"):
            sys.modules[name] = None          # any import of these now raises ImportError
        import kinema_nodes, kinema_nodes.core
        import kinema_nodes.core.model.robot, kinema_nodes.core.model.kinematics, kinema_nodes.core.model.rotations
        from kinema_nodes.core.model.loading import load_robot
        from kinema_nodes.core.model.kinematics import link_pose
        robot = load_robot("arm6")
        print(link_pose(robot, robot.zero_configuration(), robot.tool_point)[2, 3])
        assert not any(m in sys.modules and sys.modules[m] is not None for m in ("bpy", "mathutils"))
    """)
    assert result.returncode == 0, result.stderr
    assert abs(float(result.stdout) - (0.089159 - 0.09465)) < 1e-6  # UR5 at zero: base height minus wrist offset


def test_no_core_module_imports_blender():
    for path in (ROOT / "core").rglob("*.py"):
        text = path.read_text()
        for banned in ("import bpy", "from bpy", "import mathutils", "from mathutils", "import bmesh"):
            assert banned not in text, f"{path} contains '{banned}'"


def test_addon_registers_and_unregisters_twice_in_one_process():
    result = _run("""
        import bpy
        import kinema_nodes
        for _ in range(2):
            kinema_nodes.register()
            tree_type = bpy.types.NodeTree.bl_rna_get_subclass_py("KinemaNodeTree")
            assert tree_type is not None
            tree = bpy.data.node_groups.new("test", "KinemaNodeTree")
            bpy.data.node_groups.remove(tree)
            kinema_nodes.unregister()
            assert bpy.types.NodeTree.bl_rna_get_subclass_py("KinemaNodeTree") is None
        print("ok", flush=True)
        import os
        os._exit(0)  # bpy 4.5 can hang in its own shutdown
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_manifest_is_a_blender_extension_manifest():
    manifest = tomllib.loads((ROOT / "blender_manifest.toml").read_text())
    assert manifest["id"] == "kinema_nodes"
    assert manifest["type"] == "add-on"
    assert manifest["blender_version_min"] == "4.5.0"
    assert manifest["license"] == ["SPDX:GPL-3.0-or-later"]
    assert set(manifest["tags"]) == {"Animation", "Rigging", "Node"}
    assert manifest["version"] == kinema_nodes.__version__


def test_manifest_passes_blenders_own_validator(tmp_path):
    import importlib.util

    validator = next(Path(importlib.util.find_spec("bpy").origin).parent.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    result = subprocess.run([sys.executable, str(validator), "validate", str(ROOT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
