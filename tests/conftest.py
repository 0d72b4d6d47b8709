"""Shared fixtures: real robots from example-robot-data, and real Blender through the bpy module.

One `import bpy` per process (pytest-xdist gives one per worker). The add-on is registered once
per process; `blender` gives a fresh empty file to each test that asks for it.
"""

from __future__ import annotations

import pytest

from kinema_nodes.core.model.example_robots import example_robot
from kinema_nodes.core.model.loading import load_robot

#: Real robots used across the suite: an arm with a gripper (prismatic + mimic), two 6-axis
#: arms, a 7-axis arm, and two humanoids.
REAL_ROBOTS = ("panda", "ur5", "kinova", "xarm7", "talos", "g1")


def real_robot_path(name: str):
    path = example_robot(name)
    if path is None:
        pytest.fail(f"example-robot-data robot '{name}' not found: install the test dependencies (README)")
    return path


@pytest.fixture(scope="session")
def robots():
    """Loaded RobotModels by short name (real robots and the bundled ones), loaded once."""
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = load_robot(name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def blender_session():
    """The bpy module with the add-on registered for this process. A solver-kernel build that a
    core test started finishes first: bpy loading while that thread imports numba deadlocks."""
    from kinema_nodes.core.solve import wait_for_kernel_build

    wait_for_kernel_build()
    import bpy

    import kinema_nodes

    kinema_nodes.register()
    yield bpy
    kinema_nodes.unregister()


@pytest.fixture
def blender(blender_session):
    """bpy with an empty file, add-on registered."""
    blender_session.ops.wm.read_homefile(use_empty=True)
    return blender_session


@pytest.fixture(autouse=True)
def fresh_caches():
    """Every test starts with none of the per-process caches the tests before it filled: the live
    session (kinema_nodes.session.SESSION: compiled trees, fast frames, readouts), parsed postures,
    the rigs' robots, group errors, found solutions (evaluator.reset_caches, once Blender's side is
    loaded) and found configurations (core)."""
    import sys

    from kinema_nodes.core.stages.configurations import clear_cache

    clear_cache()
    evaluator = sys.modules.get("kinema_nodes.evaluator")
    if evaluator is not None:
        evaluator.reset_caches()


#: The folder a test lives in is its marker: core (no Blender), blender (real Blender through
#: the bpy module), cli (the `kinema-nodes` command line). `jax` marks tests that run PyRoki;
#: `slow` is set by hand on tests the default run leaves out.
FOLDER_MARKERS = ("core", "blender", "cli", "bench_smoke")


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = item.path.parent.name
        if folder in FOLDER_MARKERS:
            item.add_marker(getattr(pytest.mark, folder))
        if "pyroki" in item.nodeid.lower():
            item.add_marker(pytest.mark.jax)


@pytest.fixture
def kernel_calls(monkeypatch):
    """A list that grows by one each time the compiled frame call (`_kernel._frame_form`) runs."""
    from kinema_nodes.core.solve import _kernel

    assert _kernel.kernel_status(wait=True) == ("numba", None)
    calls = []
    run = _kernel.frame_form()

    def counted(*args):
        calls.append(1)
        return run(*args)

    monkeypatch.setattr(_kernel, "_frame_form", counted)
    return calls
