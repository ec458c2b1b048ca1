"""In-memory doubles of the API server for the unit tests and the benchmarks (`bench/`), never for the product.

Tests and benchmarks sit above every layer of the program; this package sits beside them, so a benchmark counts
the program's requests against the same double the tests use without importing the test suite.
"""
