"""Hypothesis profiles for the fuzz tests: `ci` (bounded, fixed seed) and `soak` (long).

Choose with HYPOTHESIS_PROFILE=soak (or pytest's `--hypothesis-profile soak`).
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "ci", max_examples=40, derandomize=True, deadline=timedelta(seconds=20), suppress_health_check=SUPPRESSED
)
settings.register_profile("soak", max_examples=2_000, deadline=None, suppress_health_check=SUPPRESSED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
