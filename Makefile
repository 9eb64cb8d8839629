# The two commands of the README's quickstart; each does all of its own set-up.
.PHONY: demo test lint bootstrap clean

demo: bootstrap  ## the main job: judge-grpo (pointwise) on the tiny model, CPU, local services
	.venv/bin/judgeflow run grpo-pointwise --profile tiny

test: bootstrap  ## lint, type-check, and the whole test suite (starts and stops what it needs)
	./scripts/test

lint: bootstrap
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy

bootstrap:
	./scripts/bootstrap

clean:
	rm -rf .judgeflow
