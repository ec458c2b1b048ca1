"""Benchmarks of the program: construction under mocks, real previews, the policy pack's cost (issue 8).

Run them with one command from the repository root::

    .venv/bin/python -m bench            # or bench/run.py; --quick for fewer repetitions

See bench/README.md for what each figure measures.
"""
