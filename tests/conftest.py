"""Shared fixtures of the unit tests.

The packing race's ejection search runs compiled (``placer.engine.packing.kernel``) once numba has
compiled it, which happens on a thread whenever a long race or the controller starts. So that a
test's path does not depend on which tests ran before it, every test sees the kernel as not ready
(the Python steps run) unless it is marked ``kernel``.
"""

from __future__ import annotations

import pytest

from placer.engine import packing


@pytest.fixture(autouse=True)
def _python_packing_steps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("kernel") is None:
        monkeypatch.setattr(packing.kernel, "ready", lambda: None)


@pytest.fixture
def compiled_kernel() -> None:
    """The packing kernel compiled (or loaded from numba's cache): tests of the compiled steps."""
    assert packing.kernel.wait(600.0), "the kernel did not compile"
