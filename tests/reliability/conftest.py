"""Fuzzing profiles for `tests/reliability`.

Two hypothesis profiles, both without a deadline (a new specialization compiles and its
kernels are imported on first use, so example times vary by far more than any deadline):

- `stridec-fuzz-ci` (the default): about 200 examples, for every CI run;
- `stridec-fuzz-long`: 5,000 examples, selected with

      python -m pytest tests/reliability --fuzz-long

Only the fuzzer reads the profile (through the `fuzz_settings` fixture); no profile is
loaded globally, so the other hypothesis tests of the suite keep their own settings.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

CI_PROFILE = "stridec-fuzz-ci"
LONG_PROFILE = "stridec-fuzz-long"

_SHARED = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
    print_blob=True,
)
settings.register_profile(CI_PROFILE, max_examples=200, **_SHARED)
settings.register_profile(LONG_PROFILE, max_examples=5000, **_SHARED)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help=f"run the graph fuzzer with the long profile ({LONG_PROFILE}: 5,000 examples)",
    )


@pytest.fixture
def fuzz_settings(request: pytest.FixtureRequest) -> settings:
    """The hypothesis settings the fuzzer runs under: long with --fuzz-long, else CI."""
    long = bool(request.config.getoption("--fuzz-long", default=False))
    return settings.get_profile(LONG_PROFILE if long else CI_PROFILE)
