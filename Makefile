# Entry points: the test suite, the demo, the benchmarks.
.PHONY: test demo bench bench-guards docs docs-serve

PYTHON ?= .venv/bin/python
# Extra arguments for the benchmarks, e.g. make bench BENCH_ARGS="--json --jobs 20000"
BENCH_ARGS ?=
# Minutes of the soak that bench-guards runs (make bench-guards SOAK_MINUTES=5 for a short one).
SOAK_MINUTES ?= 30

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

# The documentation site (mkdocs.yml) into site/, in strict mode: a broken link or a page missing from
# the navigation fails it. NO_MKDOCS_2_WARNING silences Material's banner about its successor.
docs:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

# The same site served at http://127.0.0.1:8000, rebuilt on each change.
docs-serve:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs serve --strict

# Every registered scenario (benchmarks/run.py SCENARIOS), each on a fresh schema.
bench:
	bash scripts/ensure-postgres.sh
	$(PYTHON) benchmarks/run.py all $(BENCH_ARGS)

# The memory guards (benchmarks/memory.py): a node at c=1,000, enqueue_many of 1M, then the soak.
# Each exits non-zero, saying which limit it exceeded.
bench-guards:
	bash scripts/ensure-postgres.sh
	$(PYTHON) benchmarks/run.py memory $(BENCH_ARGS)
	$(PYTHON) benchmarks/run.py soak --minutes $(SOAK_MINUTES) $(BENCH_ARGS)
