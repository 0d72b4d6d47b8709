"""flamenco/kinema_bake.js, Flamenco's job type for shot batches, run in Node.js against a
stand-in of Flamenco's job compiler (tests/cli/flamenco_standin.js, written from Flamenco's
documentation; no Manager can run here). The reference for each task's command is
`kinema-nodes batch`'s own manifest reader (core/shot/batch.py): same shots, same bake arguments."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kinema_nodes.core.shot.batch import read_manifest

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js (node) is not installed")


def _compile(settings: dict) -> dict:
    done = subprocess.run([NODE, str(Path(__file__).with_name("flamenco_standin.js")), str(ROOT / "flamenco" / "kinema_bake.js"),
                           json.dumps(settings)], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


MANIFEST = {
    "defaults": {"robot": "arm6", "solver": "numpy"},
    "shots": [
        {"name": "wave", "targets": "csv/wave.csv", "out": "out/wave.blend", "joints_out": "out/wave.csv", "fps": 24},
        {"name": "reach", "robot": "robots/my_arm.urdf", "link": "tool0", "targets": "csv/reach.csv", "out": "out/reach.blend",
         "start": {"elbow_joint": -1.5, "wrist_1_joint": 0.25}, "speed_limit": 80, "report": "out/reach.png",
         "limits": {"check": True, "margin": 10, "max_acc": 2.5}},
        {"targets": "csv/third.csv", "out": "/abs/third.blend", "preset": "pick_and_place", "solver": "pyroki"},
    ],
}


def test_the_job_type_compiles_a_manifest_into_one_bake_task_per_shot_like_kinema_nodes_batch(tmp_path):
    (tmp_path / "csv").mkdir()
    for name in ("wave", "reach", "third"):
        (tmp_path / "csv" / f"{name}.csv").write_text("frame,x,y,z,qw,qx,qy,qz\n")
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    compiled = _compile({"manifest": json.dumps(MANIFEST), "manifest_dir": str(tmp_path), "kinema_nodes": "/opt/kn/bin/kinema-nodes"})
    assert "error" not in compiled, compiled
    assert compiled["job_type"]["label"] == "Kinema Nodes Bake"
    assert {s["key"] for s in compiled["job_type"]["settings"]} >= {"manifest", "manifest_dir"}
    shots = read_manifest(tmp_path / "manifest.json")
    tasks = compiled["tasks"]
    assert [t["name"] for t in tasks] == [f"bake-{s.name}" for s in shots] == ["bake-wave", "bake-reach", "bake-third"]
    for task, shot in zip(tasks, shots):
        assert task["type"] == "misc" and task["dependencies"] == []
        (command,) = task["commands"]
        assert command["name"] == "exec"
        assert command["parameters"]["exe"] == "/opt/kn/bin/kinema-nodes"
        assert command["parameters"]["args"] == shot.bake_arguments()
    assert tasks[1]["commands"][0]["parameters"]["args"][:2] == ["bake", str(tmp_path / "robots" / "my_arm.urdf")]


@pytest.mark.parametrize("manifest, message", [
    ("[]", "manifest must hold a non-empty list of shots"),
    ("{nope", "manifest is not valid JSON"),
    ('[{"robot": "arm6", "out": "a.blend"}]', "shot 1: needs 'targets'"),
    ('[{"robot": "arm6", "targets": "a.csv", "out": "a.blend", "colour": 1}]', "shot 1: unknown key 'colour'"),
    ('[{"robot": "arm6", "targets": "a.csv", "out": "a.blend", "fps": -2}]', "shot 1: fps must be a positive number"),
    ('[{"robot": "arm6", "targets": "a.csv", "out": "a.blend"}, {"robot": "arm6", "targets": "b.csv", "out": "x/a.blend"}]',
     "two shots are named 'a'"),
])
def test_a_bad_manifest_is_one_compile_error(manifest, message):
    compiled = _compile({"manifest": manifest, "manifest_dir": "/farm/shots"})
    assert compiled.get("error", "").startswith(message), compiled
