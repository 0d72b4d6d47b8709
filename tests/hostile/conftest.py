"""The hostile-input corpus (issue #19): shared helpers.

Every case ends one of two ways, and asserts which: a one-line refusal (a `KinemaError`
through the Python API, exit 2 and one `kinema-nodes: error:` line through the CLI), or a
correct acceptance. Cases that write next to existing outputs also assert that nothing there
changed and nothing was left behind (`Untouched`).

Disk-full cases run on a 1 MiB tmpfs mounted for the test (`full_disk`), and are skipped with
the reason where the test cannot mount one (not root, or no mount permission in a container).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.parent.name == "hostile":
            item.add_marker(pytest.mark.hostile)


def pytest_configure(config):
    config.addinivalue_line("markers", "hostile: the hostile-input corpus of issue #19 (tests/hostile)")


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs for the test (returns its folder); skipped with the reason where a test
    cannot mount one."""
    mount = shutil.which("mount")
    folder = tmp_path / "small_disk"
    folder.mkdir()
    if os.geteuid() != 0 or mount is None:
        pytest.skip("disk-full cases need root to mount a 1 MiB tmpfs (not root here)")
    made = subprocess.run([mount, "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder on a read-only mount (root ignores permission bits, so chmod is no test)."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("read-only cases need root to mount a read-only tmpfs")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {made.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


