"""Loading modules without the cyclic collector (app/loading.py)."""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator

import pytest

from assern.app.loading import Uncollected


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the collector of this test process as it was found, nothing frozen."""
    was = gc.isenabled()
    yield
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.usefixtures("collector")
def test_the_collector_is_off_inside_on_after_and_what_was_loaded_is_frozen() -> None:
    gc.enable()
    gc.unfreeze()
    with Uncollected():
        assert not gc.isenabled()
        loaded = [[n] for n in range(1000)]  # objects the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(loaded)


@pytest.mark.usefixtures("collector")
def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    with Uncollected():
        pass
    assert not gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_a_failed_import_turns_the_collector_back_on() -> None:
    gc.enable()
    with pytest.raises(ModuleNotFoundError), Uncollected():
        importlib.import_module("assern.no_such_module")
    assert gc.isenabled()
