# Entry points: the test suite, the demo, the benchmarks.
.PHONY: test demo bench

PYTHON ?= .venv/bin/python
# Extra arguments for the benchmarks, e.g. make bench BENCH_ARGS="--json --jobs 20000"
BENCH_ARGS ?=

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

# Every registered scenario (benchmarks/run.py SCENARIOS), each on a fresh schema.
bench:
	bash scripts/ensure-postgres.sh
	$(PYTHON) benchmarks/run.py all $(BENCH_ARGS)
