"""The ``workbench`` command line: ingest, delete, search, ask, eval, tune, calibrate, runs, monitor, models, train.

Every command takes ``--store DIR`` (default: ``$WORKBENCH_HOME`` or ``.workbench``); ``--json`` prints
machine-readable output only. Bad input exits non-zero with one line on stderr — never a traceback (set
``WORKBENCH_DEBUG=1`` to see one for a real bug).

Exit codes, the same for every command: 0 done; 2 bad input — anything the user can fix (an argument, a config
or history file, a question, a golden file, a store path, a store that is busy, a batch with nothing usable),
one ``error:`` line each; 1 an internal error (a bug), or ``eval --check`` below a floor; 3 ``monitor``'s drift
alarm fired; 130 interrupted. A
batch that is partly bad still does what it can: ``ingest`` exits 0 with a ``problem:`` line per bad file when
something was ingested; ``eval`` and ``tune`` evaluate the good golden lines and then exit 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from workbench.conversation import MODES as CONVERSATION_MODES

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

EXIT_USAGE = 2

# Commands that need more than `pip install .`: the module each one imports and the extra (pyproject.toml) that
# installs it, checked before the command starts (train would otherwise fail at its export, after the training).
NEEDS_EXTRA = {"tune": ("plotly", "plots"), "train": ("onnx", "train")}


class CliError(Exception):
    """A user-fixable problem: printed as one line, exit code 2."""


def _known_errors() -> tuple[type[BaseException], ...]:
    from pipeline.config import ConfigError
    from pipeline.engine import QuestionError
    from pipeline.models.resolve import ModelUnavailable
    from pipeline.storage.store import StoreError

    return (CliError, ConfigError, StoreError, QuestionError, ModelUnavailable, FileNotFoundError)


def _escape(text) -> str:
    """One printable line (pipeline.ingestion.files.escape): no newline or ANSI escape from a name or a value."""
    from pipeline.ingestion.files import escape

    return escape(os.fsdecode(text) if isinstance(text, bytes) else str(text))


MAX_INPUT_FILE_BYTES = 8 * 1024 * 1024   # a --config or --history file larger than this is not one
MAX_ERROR_CHARS = 2000                    # an error line is cut here: a value it quotes cannot make it endless


def read_bounded(path: Path, what: str, limit: int = MAX_INPUT_FILE_BYTES) -> str:
    """The UTF-8 text of ``path``, read at most ``limit`` bytes far: a larger file (or an endless one such as
    /dev/zero) is an error naming it, before anything is parsed. OSError and UnicodeDecodeError pass through."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CliError(f"{what} {path} is larger than {limit // (1024 * 1024)} MB; it cannot be one")
    return data.decode("utf-8")


def load_config(args: argparse.Namespace):
    from pipeline.config import ConfigError, PipelineConfig

    cfg = PipelineConfig()
    if getattr(args, "config", None):
        path = Path(args.config)
        try:
            text = read_bounded(path, "config file")
        except OSError as exc:
            raise CliError(f"cannot read config file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise CliError(f"cannot read config file {path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
                           f"offset {exc.start})") from None
        try:
            cfg = PipelineConfig.from_json(text)
        except RecursionError:
            raise CliError(f"config file {path} is nested too deeply to be a config") from None
        except (ValueError, OverflowError) as exc:
            if isinstance(exc, ConfigError):
                raise
            # json's own limits, e.g. an integer of thousands of digits ("Exceeds the limit ... for integer
            # string conversion"): the file is not a config this program can read
            raise CliError(f"config file {path} is not a valid config: {exc}") from None
    if getattr(args, "set", None):
        cfg = cfg.with_overrides(list(args.set))
    return cfg


def open_store(args: argparse.Namespace, cfg=None, repair: bool = True):
    """Open the store, and repair it first if an interrupted write or a damaged index is detected."""
    from pipeline.ingestion.ingest import needs_repair
    from pipeline.ingestion.ingest import repair as repair_store
    from pipeline.models.registry import default_models
    from pipeline.storage.store import Store

    store = Store.open(args.store)
    if store.waited_for:  # a reader that waited out a writer says so; a refusal is still one line
        print(f"note: waited for {store.waited_for} to release {store.home}", file=sys.stderr)
    if repair and cfg is not None and needs_repair(store) and not store.is_empty():
        for action in repair_store(store, cfg, default_models()):
            print(f"note: {action}", file=sys.stderr)
    return store


def _emit(args: argparse.Namespace, data, human: Callable[[], str]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(human())


# -- commands ------------------------------------------------------------------------------------------------

def cmd_ingest(args: argparse.Namespace) -> int:
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.models.registry import default_models

    cfg = load_config(args)
    with open_store(args, cfg) as store:
        report = ingest_paths(store, args.paths, cfg, default_models(), progress=not args.json and sys.stderr.isatty())
    for problem in report.problems:
        print(f"problem: {problem}", file=sys.stderr)
    _emit(args, report.to_dict(), lambda: (
        f"{report.documents} documents, {report.chunks} chunks; embedded {report.embedded}, "
        f"removed {report.deleted}; corpus version {report.corpus_version}"
        + "".join(f"\nnote: {n}" for n in report.notes)))
    valid = report.documents + len(report.retracted)
    return EXIT_USAGE if report.problems and valid == 0 else 0  # bad input only; partial batches succeed


def cmd_delete(args: argparse.Namespace) -> int:
    from pipeline.ingestion.ingest import delete_document

    with open_store(args) as store:
        removed = delete_document(store, args.doc_id)
        version = store.corpus_version
    if not removed:
        raise CliError(f"no document with id {args.doc_id!r} in {store.home} (list them with: workbench docs)")
    _emit(args, {"doc_id": args.doc_id, "chunks_removed": removed, "corpus_version": version},
          lambda: f"deleted {args.doc_id}: {removed} chunks removed; corpus version {version}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        docs = store.documents()
        version = store.corpus_version
    _emit(args, {"corpus_version": version, "documents": [
        {"doc_id": d.doc_id, "title": d.title, "chunks": d.chunk_count, "source": d.source, **d.metadata}
        for d in docs]}, lambda: "\n".join(f"{d.doc_id:<40} {d.chunk_count:>3} chunks  {d.title}" for d in docs)
        or "the store is empty")
    return 0


def _read_history(path: str | None):
    if not path:
        return ()
    try:
        data = json.loads(read_bounded(Path(path), "history file"))
    except OSError as exc:
        raise CliError(f"cannot read history file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"cannot read history file {path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
                       f"offset {exc.start})") from None
    except RecursionError:
        raise CliError(f"history file {path} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or an integer longer than Python converts
        raise CliError(f"history file {path} is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data = data.get("history", [])
    if not isinstance(data, list):
        raise CliError(f"history file {path} must hold a list of {{\"role\", \"content\"}} turns")
    return data


def _choose_history(args: argparse.Namespace, question: str):
    """The turns of ``--history`` that go with ``question`` under ``--history-mode``: the Ask page's rule
    (:func:`workbench.conversation.select_history`), so the CLI and the app send the same turns."""
    from pipeline.engine import QuestionError
    from workbench.conversation import select_history

    try:
        return select_history(question, _read_history(args.history), args.history_mode)
    except QuestionError as exc:
        raise CliError(f"history file {args.history}: {exc}") from None


def _with_note(note: str, text: str) -> str:
    return f"{note}\n{text}" if note else text


def _pipeline(args: argparse.Namespace, cfg, store):
    from pipeline.engine import Pipeline

    return Pipeline(store, cfg=cfg)


def cmd_search(args: argparse.Namespace) -> int:
    from workbench.report import render_search
    from workbench.terminal import safe, search_flags

    cfg = load_config(args)
    with open_store(args, cfg) as store:
        _require_corpus(store, args)
        choice = _choose_history(args, args.query)
        trace = _pipeline(args, cfg, store).search(args.query, history=choice.history)
    data = {**trace.to_dict(), "history_note": choice.note}
    for key in ("generation", "validation", "trust"):
        data.pop(key, None)
    data["flags"] = search_flags(trace)  # raw text stays in the JSON; flags say what a consumer must escape
    _emit(args, data, lambda: safe(_with_note(choice.note, render_search(trace))))
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from workbench.report import render_answer
    from workbench.terminal import answer_flags, safe

    cfg = load_config(args)
    with open_store(args, cfg) as store:
        _require_corpus(store, args)
        choice = _choose_history(args, args.question)
        trace = _pipeline(args, cfg, store).ask(args.question, history=choice.history)
    _emit(args, {**trace.to_dict(), "history_note": choice.note, "flags": answer_flags(trace)},
          lambda: safe(_with_note(choice.note, render_answer(trace))))
    return 0


def _require_corpus(store, args) -> None:
    if store.is_empty():
        raise CliError(f"the store {store.home} is empty; ingest documents first: "
                       "workbench ingest golden/corpus" + (f" --store {args.store}" if args.store else ""))


def _corpus_opener(args: argparse.Namespace, cfg) -> Callable[[], object]:
    """``open_store`` for eval and tune: the store, or the "ingest first" error when it is empty."""
    def opener():
        store = open_store(args, cfg)
        try:
            _require_corpus(store, args)
        except BaseException:
            store.close()
            raise
        return store
    return opener


def cmd_eval(args: argparse.Namespace) -> int:
    from pipeline.models.encoders import set_torch_threads
    from workbench.evaluate import run_eval

    cfg = load_config(args)
    set_torch_threads(args.threads)
    if args.week_one:
        return _week_one(args, cfg)
    if args.examples is not None:
        raise CliError("--examples applies to the week-one report; add --week-one")
    return run_eval(args.golden, cfg, open_store=_corpus_opener(args, cfg), check=args.check, out=args.out,
                    csv_path=args.csv, limit=args.limit, nli=not args.no_nli, json_output=args.json,
                    progress=sys.stderr.isatty(), split=args.split, split_file=args.split_file,
                    batch=not args.no_batch)


def _week_one(args: argparse.Namespace, cfg) -> int:
    """``eval --week-one``: the citation-error report of workbench.week_one (validation off, then on)."""
    from workbench.week_one import DEFAULT_EXAMPLES, run_week_one

    for flag, given in (("--check", args.check), ("--csv", args.csv)):
        if given:
            raise CliError(f"{flag} does not apply to --week-one (its files go under --out DIR)")
    examples = DEFAULT_EXAMPLES if args.examples is None else args.examples
    if examples < 0:
        raise CliError(f"--examples must be at least 0, got {examples}")
    return run_week_one(args.golden, cfg, open_store=_corpus_opener(args, cfg), out=args.out, limit=args.limit,
                        nli=not args.no_nli, json_output=args.json, progress=sys.stderr.isatty(), split=args.split,
                        split_file=args.split_file, examples=examples)


def cmd_tune(args: argparse.Namespace) -> int:
    from pipeline.models.encoders import set_torch_threads
    from workbench.tune import run_tune

    cfg = load_config(args)
    set_torch_threads(args.threads)
    return run_tune(args.golden, cfg, out=args.out, max_false_answer_rate=args.max_false_answer_rate, grid=args.grid,
                    traces=args.traces, json_output=args.json, open_store=_corpus_opener(args, cfg),
                    progress=sys.stderr.isatty(), split_file=args.split_file, fit=args.fit)


def cmd_runs(args: argparse.Namespace) -> int:
    from pipeline.storage.runs import RunLog
    from pipeline.storage.store import data_dir

    log = RunLog(data_dir(args.store) / "runs.sqlite")
    if args.action == "show":
        if not args.run_id:
            raise CliError("usage: workbench runs show RUN_ID")
        trace = log.get(args.run_id)
        if trace is None:
            raise CliError(f"no run with id {args.run_id!r} (list them with: workbench runs)")
        print(trace.to_json(indent=2))
        return 0
    rows = log.list(limit=args.limit)
    _emit(args, [r.to_dict() for r in rows], lambda: "\n".join(
        f"{r.run_id}  {r.created_at}  {r.gate_decision:<7} {r.gate_score:7.4f}  {r.question[:70]}" for r in rows)
        or "no runs yet")
    return 0


EXIT_ALARM = 3


def cmd_monitor(args: argparse.Namespace) -> int:
    """Rates per hour or day over query_runs and the drift alarm (workbench/monitor.py); exit 3 on an alarm."""
    from pipeline.storage.runs import RunLog
    from pipeline.storage.store import data_dir
    from workbench import monitor

    try:
        monitor.validate_windows(args.baseline, args.recent, args.alpha)
    except ValueError as exc:
        raise CliError(f"monitor: {exc}") from None
    log = RunLog(data_dir(args.store) / "runs.sqlite")
    rep = monitor.report(log.monitor_rows(), log.clicks(), bucket=args.bucket, baseline=args.baseline,
                         recent=args.recent, alpha=args.alpha)
    _emit(args, rep.to_dict(), lambda: monitor.report_text(rep))
    return EXIT_ALARM if rep.check.alarm else 0


def cmd_models(args: argparse.Namespace) -> int:
    """Which models the configuration names, whether each is here and what is lost without it; with
    ``--download``, fetch the missing hub models where the network allows (exit 0 either way: the lines say)."""
    import dataclasses

    from pipeline.models import inventory

    cfg = load_config(args)
    checks = inventory.fetch(cfg) if args.download else inventory.check(cfg)
    _emit(args, [{**dataclasses.asdict(c), "available": c.available} for c in checks],
          lambda: "\n".join(_escape(c.line()) for c in checks))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train a reading model from ../shared/traindata (resuming a run of the same settings), export it as int8
    ONNX with its model card; ``--install`` puts it where the pipeline loads it (workbench/training/)."""
    import dataclasses

    from workbench.training.data import TrainDataError, default_data_dir
    from workbench.training.export import source_commit
    from workbench.training.run import (
        default_out,
        default_settings,
        export_answerability,
        export_nli,
        train_answerability,
        train_nli,
    )

    data = Path(args.data) if args.data else default_data_dir()
    out = Path(args.out) if args.out else default_out(args.task)
    overrides = {k: v for k, v in (("layers", args.layers), ("max_tokens", args.max_tokens),
                                   ("epochs", args.epochs), ("max_pairs", args.max_pairs)) if v is not None}
    settings = dataclasses.replace(default_settings(args.task), **overrides)
    say = lambda line: print(line, file=sys.stderr, flush=True)
    try:
        train, export = ((train_nli, export_nli) if args.task == "nli" else
                         (train_answerability, export_answerability))
        if not args.export_only:
            train(data, out, settings, resume=not args.fresh, report=say)
        folder = export(out, data, source_commit(), install_to_weights=args.install, report=say)
    except (TrainDataError, ValueError, FileNotFoundError) as exc:
        raise CliError(str(exc)) from None
    print(folder)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Label-free calibration (workbench/calibrate.py): pseudo-questions and unanswerable probes written from the
    corpus, searched once each; where the gate's operating point lands, and the threshold for the target."""
    from pipeline.models.encoders import set_torch_threads
    from pipeline.models.registry import default_models
    from workbench import calibrate

    if args.probes < 10:
        raise CliError(f"--probes must be at least 10, got {args.probes}")
    if not 0.0 < args.target < 1.0:
        raise CliError(f"--target must be a false-answer rate between 0 and 1 (e.g. 0.05), got {args.target:g}")
    try:
        weights = calibrate.parse_weights(args.weights) if args.weights else calibrate.WEIGHTS
    except ValueError as exc:
        raise CliError(f"--{exc}") from None
    cfg = load_config(args)
    set_torch_threads(args.threads)
    golden = _calibration_golden(args) if args.golden else None
    with open_store(args, cfg) as store:
        _require_corpus(store, args)
        try:
            result = calibrate.calibrate(store, default_models(), cfg, n=args.probes, seed=args.seed,
                                         target=args.target, weights=weights)
        except ValueError as exc:
            raise CliError(f"calibrate: {exc}") from None
        measured = calibrate.measure(store, default_models(), cfg, result.estimate, *golden) if golden else None
    data = calibrate.to_dict(result, measured, with_probes=args.probes_out)
    _emit(args, data, lambda: _escape_lines(calibrate.report_lines(result, measured)))
    return 0


def _calibration_golden(args: argparse.Namespace):
    """(the golden cases of the chosen part, a label naming the part) for ``calibrate --golden``; without
    ``--split``, the test part when a split file is beside the golden file, else every case."""
    from workbench.golden import find_split, load_golden, select

    golden = load_golden(args.golden)
    split = find_split(args.golden, None)
    part = args.split or ("test" if split is not None else "all")
    chosen = select(golden, split, part)
    if not chosen.cases:
        raise CliError(f"{args.golden} has no usable cases in the {part} part")
    return chosen, f"{Path(args.golden).name}, {part} part ({len(chosen.cases)} cases)"


def _escape_lines(lines: list[str]) -> str:
    return "\n".join(_escape(line) for line in lines)


# -- parser ----------------------------------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser, config: bool = True, json_flag: bool = True) -> None:
    p.add_argument("--store", metavar="DIR", default=None,
                   help="data directory (default: $WORKBENCH_HOME or .workbench)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print machine-readable JSON only")
    if config:
        p.add_argument("--config", metavar="FILE", help="PipelineConfig JSON file")
        p.add_argument("--set", action="append", metavar="STAGE.KEY=VALUE", default=[],
                       help="override one setting, e.g. --set gate.signal=dense (repeatable)")


def _history_options(p: argparse.ArgumentParser) -> None:
    """--history and --history-mode, as search and ask both take them."""
    p.add_argument("--history", metavar="FILE", help="JSON list of {role, content} turns")
    p.add_argument("--history-mode", choices=list(CONVERSATION_MODES), default="follow-ups",
                   help="which turns of --history go with the question: follow-ups (default; only when it reads "
                        "as a follow-up, the current thread; the Ask page's rule), always, never")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="load, chunk, embed and index documents (incremental)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (.md .txt .html .jsonl)")
    _common(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("delete", help="remove a document from both indexes")
    p.add_argument("doc_id", metavar="DOC_ID")
    _common(p, config=False)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("docs", help="list the documents in the store")
    _common(p, config=False)
    p.set_defaults(func=cmd_docs)

    p = sub.add_parser("search", help="retrieve, rerank and gate (no generation)")
    p.add_argument("query", metavar="QUERY")
    _history_options(p)
    _common(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="answer a question with cited sources, or abstain")
    p.add_argument("question", metavar="QUESTION")
    _history_options(p)
    _common(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("eval", help="run a golden set and report metrics")
    p.add_argument("golden", metavar="GOLDEN")
    p.add_argument("--check", metavar="FLOORS", help="exit non-zero when a metric is below its floor")
    p.add_argument("--csv", metavar="FILE", help="also write the per-row results as CSV")
    p.add_argument("--out", metavar="DIR", help="write summary, rows and traces under DIR")
    p.add_argument("--limit", type=_positive_int, default=None, help="only the first N cases")
    p.add_argument("--no-nli", action="store_true",
                   help="skip the evaluation's own NLI runs (correctness by entailment; claims the validator did "
                        "not read); the validator's NLI labels are still summarised")
    p.add_argument("--no-batch", action="store_true",
                   help="ask one case at a time instead of in blocks (the rows are the same; slower)")
    p.add_argument("--split", choices=["tune", "test", "all"], default=None,
                   help="evaluate one part of the golden split (default: all; with --check, the floors file's part)")
    p.add_argument("--split-file", metavar="FILE", help="the split (default: GOLDEN's .split.json beside it)")
    p.add_argument("--week-one", action="store_true", help="the week-one citation-error report: run the cases with "
                   "validation off, then on, judge every citation, report the wrong rates and their difference")
    p.add_argument("--examples", type=int, default=None, metavar="N",
                   help="with --week-one: wrong citations shown as examples (default 10)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: one case at a time runs "
                   "fastest single-threaded on shared cores; 0 = torch's default)")
    _common(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("tune", help="sweep both gate thresholds over stored traces")
    p.add_argument("golden", metavar="GOLDEN")
    p.add_argument("--out", metavar="DIR", default="tune-output", help="report and plots go here")
    p.add_argument("--max-false-answer-rate", type=float, default=0.05)
    p.add_argument("--traces", metavar="FILE", help="replay these traces (an eval's traces.jsonl) instead of "
                   "searching again; default: OUT/traces.jsonl when it matches the store")
    p.add_argument("--grid", type=int, default=20, help="thresholds per signal in the grid (default 20)")
    p.add_argument("--split-file", metavar="FILE", help="fit on its tune part, report on its test part (default: "
                   "GOLDEN's .split.json beside it; without one every figure is in-sample but the CV)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; 0 = torch's default)")
    p.add_argument("--fit", action="store_true", help="also fit the learned rule (gate.learned_*) on the tune part, "
                   "5-fold cross-validated, and report its held-out trade-off and settings")
    _common(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("calibrate", help="estimate the gate's operating point on this corpus without labels",
                       description="Write pseudo-questions (a sentence of a chunk without its answer) and "
                       "unanswerable probes (off-corpus questions; pseudo-questions with a key term swapped for one "
                       "the corpus lacks, for one of another document, or for another word of the same passage) from "
                       "the store's corpus, search each once (no generation), and estimate the answer rate and the "
                       "false-answer rate at the configured threshold and the threshold that meets --target. With "
                       "--golden, the same two settings are measured on the labelled cases.")
    p.add_argument("--probes", type=int, default=200, metavar="N",
                   help="pseudo-questions to write (default 200); N/2 off-corpus probes and N/4 of each on-topic kind")
    p.add_argument("--seed", type=int, default=0, help="which chunks and words are drawn (default 0)")
    p.add_argument("--target", type=float, default=0.05, help="false-answer rate to calibrate for (default 0.05)")
    p.add_argument("--weights", metavar="KIND=W,...", help="how much each unanswerable probe kind weighs in the "
                   "estimate (off-corpus, swapped-out, swapped-in, answer-removed, swapped-near; kinds not named "
                   "weigh 0; default: off-corpus half, swapped-out, swapped-in and answer-removed a sixth each)")
    p.add_argument("--golden", metavar="GOLDEN", help="also measure both settings on these labelled cases")
    p.add_argument("--split", choices=["tune", "test", "all"], default=None,
                   help="with --golden: the part of its split to measure on (default: test when GOLDEN has a "
                   "split file beside it, else all)")
    p.add_argument("--probes-out", action="store_true", help="with --json: include every probe, its score and "
                   "whether it was answered")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; 0 = torch's default)")
    _common(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("runs", help="list query_runs, or show one trace")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("run_id", nargs="?", metavar="RUN_ID")
    p.add_argument("--limit", type=_positive_int, default=50, help="how many runs, newest first (default 50)")
    _common(p, config=False)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("monitor", help="abstention, fallback, unsupported, cache-hit and click-through rates per "
                       "hour or day, latency and LLM cost, and a drift alarm (exit 3 when it fires)",
                       description="Rates per hour or day over query_runs and a drift alarm: the last RECENT runs "
                       "against the BASELINE runs before them, one-sided Fisher exact test per metric at ALPHA/m "
                       "(Bonferroni), so a check raises a false alarm with probability at most ALPHA. Exit codes: "
                       "0 no alarm (or too few runs to check), 3 an alarm fired (the runs behind it are listed), "
                       "2 bad input.")
    p.add_argument("--bucket", choices=["hour", "day"], default="day", help="rates per UTC hour or day (default day)")
    p.add_argument("--baseline", type=int, default=100, metavar="N", help="runs in the baseline window (default 100)")
    p.add_argument("--recent", type=int, default=25, metavar="N", help="runs in the recent window (default 25)")
    p.add_argument("--alpha", type=float, default=0.01, help="false-alarm probability per check (default 0.01)")
    _common(p, config=False)
    p.set_defaults(func=cmd_monitor)

    p = sub.add_parser("train", help="train a reading model from ../shared/traindata and export it (int8 ONNX)",
                       description="Fine-tune from the packaged all-MiniLM-L6-v2 weights on ../shared/traindata "
                       "(never copied into the repository): deterministic seed, held-apart part, progress with ETA "
                       "on stderr, resumable checkpoints and a learning curve under build/train/TASK/; then export "
                       "the selected checkpoint as int8 ONNX with its model card. --install puts it in "
                       "pipeline/models/weights/TASK/, where the pipeline loads it (make train-models).")
    p.add_argument("task", choices=["answerability", "nli"],
                   help="which model: the answerability reader, or the NLI citation check")
    p.add_argument("--data", help="the training data folder (default ../shared/traindata)")
    p.add_argument("--out", help="checkpoints and export (default build/train/TASK)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint and start again")
    p.add_argument("--export-only", action="store_true", help="export the finished run in --out without training")
    p.add_argument("--install", action="store_true", help="copy the export to pipeline/models/weights/TASK")
    p.add_argument("--layers", type=int, help="encoder layers kept from the base model (default 6)")
    p.add_argument("--max-tokens", type=int, help="tokens per pair (default 64; nli 128)")
    p.add_argument("--epochs", type=int, help="epochs (default 2)")
    p.add_argument("--max-pairs", type=int, help="stop after this many pairs (a smoke run or a time budget)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("models", help="list the models the configuration names and whether each is here")
    p.add_argument("--download", action="store_true", help="download the missing hub models (cross-encoder, NLI) "
                   "where the network allows; says per model when it cannot")
    _common(p)
    p.set_defaults(func=cmd_models)
    return parser


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """An error line's text cut to ``limit`` characters, saying how much was left out (a 100,000-character id
    is named by its start, not echoed)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def _require_extra(command: str) -> None:
    """A command whose extra is not installed is one line naming the install, not a ModuleNotFoundError."""
    module, extra = NEEDS_EXTRA.get(command, (None, None))
    if module and importlib.util.find_spec(module) is None:
        raise CliError(f"workbench {command} needs {module}, which is not installed: install it with "
                       f"pip install '.[{extra}]'")


def _require_utf8(args: argparse.Namespace) -> None:
    """Arguments are text: bytes that are not UTF-8 (Python keeps them as lone surrogates) are an error naming
    the argument, not an encoding failure later."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise CliError(f"the {name.replace('_', '-')} argument is not valid UTF-8 (a byte that is not "
                                   f"text at character {exc.start}); pass it as UTF-8 text") from None


def _damaged_database(exc: BaseException, args: argparse.Namespace) -> str:
    """For SQLite's "file is not a database" / "malformed" errors: a line naming the store's database files and
    what to do ("" for any other exception)."""
    import sqlite3

    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.OperationalError | sqlite3.IntegrityError):
        return ""
    from pipeline.storage.store import data_dir

    home = data_dir(getattr(args, "store", None))
    files = ", ".join(str(p) for p in sorted(home.glob("*.sqlite"))) or str(home)
    return (f"a database file of the store {home} is damaged ({exc}): {files}; restore it from a backup, or move "
            "the store aside and ingest again")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_clip(text, 40)!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number; give 1 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = os.environ.get("WORKBENCH_DEBUG")
    try:
        _require_utf8(args)
        _require_extra(args.command)
        if getattr(args, "store", None) is not None and not args.store.strip():
            raise CliError("--store is empty (an unset shell variable?); name the store directory, or leave --store "
                           "out to use $WORKBENCH_HOME or .workbench")
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        if isinstance(exc, _known_errors()):
            print(f"error: {_clip(_escape(exc))}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, OSError) and exc.filename is not None:  # a path the user gave cannot be used
            print(f"error: cannot use {_clip(_escape(exc.filename))}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        damaged = _damaged_database(exc, args)
        if damaged:
            print(f"error: {_clip(_escape(damaged))}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, RecursionError):  # only input nests this deep
            print(f"error: the input is nested too deeply to read ({exc})", file=sys.stderr)
            return EXIT_USAGE
        print(f"internal error: {type(exc).__name__}: {_clip(_escape(exc))} (set WORKBENCH_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
