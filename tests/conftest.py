"""Session-wide test setup.

The hypothesis pytest plugin imports the `hypothesis` package lazily, in its end-of-session summary. When only
integration tests ran, that import is the first compile after the Pulumi engine's inline programs ran in this
process, and CPython 3.11.7 can then refuse it ("SystemError: AST constructor recursion depth mismatch", fixed
in later CPython releases): the run passed, but pytest crashes while printing the summary. Importing it at the
start makes that late compile unnecessary.
"""

import hypothesis  # noqa: F401
