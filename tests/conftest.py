"""Session-wide test setup.

The hypothesis pytest plugin imports the `hypothesis` package lazily, in its end-of-session summary. When only
integration tests ran, that import is the first compile after the Pulumi engine's inline programs ran in this
process, and CPython 3.11.7 can then refuse it ("SystemError: AST constructor recursion depth mismatch", fixed
in later CPython releases): the run passed, but pytest crashes while printing the summary. Importing it at the
start makes that late compile unnecessary.

Tests marked `charts` read the pinned chart archives (tests/support/charts.py): they are resolved once, at
collection, and when no source has them one line says so there and each of those tests fails with it.

Property tests run without hypothesis's per-example deadline: they judge answers, and a 2-core runner that is
building or running something else can take longer than 200 ms over one example (speed lives in `bench/`).
"""

import hypothesis
import pytest

from tests.support import charts

hypothesis.settings.register_profile("project", deadline=None)
hypothesis.settings.load_profile("project")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker(charts.MARKER) for item in items):
        return
    line = charts.unavailable()
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if line is not None and reporter is not None:
        reporter.write_line(line)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker(charts.MARKER) is not None:
        line = charts.unavailable()
        if line is not None:
            pytest.fail(line, pytrace=False)
