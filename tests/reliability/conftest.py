"""Fuzzing profiles for `tests/reliability`.

Two hypothesis profiles, both without a deadline (a new specialization compiles and its
kernels are imported on first use, so example times vary by far more than any deadline):

- `stridec-fuzz-ci` (the default): about 150 examples, for every CI run;
- `stridec-fuzz-long`: 10,000 examples, selected with

      python -m pytest tests/reliability --fuzz-long

`--fuzz-examples N` sets the number of examples of either profile (a shorter long run:
`--fuzz-long --fuzz-examples 5000`).

Only the fuzzer reads the profile (through the `fuzz_settings` fixture); no profile is
loaded globally, so the other hypothesis tests of the suite keep their own settings.
"""

from __future__ import annotations

from collections import Counter

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
settings.register_profile(CI_PROFILE, max_examples=150, **_SHARED)
settings.register_profile(LONG_PROFILE, max_examples=10000, **_SHARED)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help=f"run the graph fuzzer with the long profile ({LONG_PROFILE}: 10,000 examples)",
    )
    parser.addoption(
        "--fuzz-examples",
        type=int,
        default=None,
        help="the number of examples the graph fuzzer runs (either profile)",
    )


def _profile_name(config: pytest.Config) -> str:
    return LONG_PROFILE if config.getoption("--fuzz-long", default=False) else CI_PROFILE


@pytest.fixture
def fuzz_settings(request: pytest.FixtureRequest) -> settings:
    """The hypothesis settings the fuzzer runs under: long with --fuzz-long, else CI;
    `--fuzz-examples` sets their number of examples."""
    profile = settings.get_profile(_profile_name(request.config))
    count = request.config.getoption("--fuzz-examples", default=None)
    return profile if count is None else settings(profile, max_examples=count)


_STATS = pytest.StashKey[Counter]()


@pytest.fixture
def fuzz_stats(request: pytest.FixtureRequest) -> Counter:
    """Counts the fuzzer keeps (examples run, passed, rejected); shown in the summary."""
    return request.config.stash.setdefault(_STATS, Counter())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    stats = config.stash.get(_STATS, None)
    if not stats:
        return
    counts = ", ".join(f"{key}: {n}" for key, n in sorted(stats.items()))
    terminalreporter.write_sep("-", f"graph fuzzer ({_profile_name(config)})")
    terminalreporter.write_line(counts)
