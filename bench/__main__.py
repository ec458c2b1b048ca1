"""`python -m bench`: run every benchmark, print the table, write the JSON."""

from bench.run import main

raise SystemExit(main())
