"""The `rec` fixture: a `Recorder` of fake supervised children (tests/support/supervised_children.py)."""

from __future__ import annotations

import pytest
from supervised_children import Recorder


@pytest.fixture
def rec() -> Recorder:
    return Recorder()
