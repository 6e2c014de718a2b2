"""Results files under ``benchmarks/results/``: what every generated section of BENCHMARKS.md is rendered from.

A results file is JSON with a ``meta`` block saying when, where and under what load it was measured, from
which commit (with ``git_diff_sha1``, the hash of the uncommitted changes, when the tree was dirty), and with which
model (:func:`run_meta`), plus whatever the benchmark measured. A benchmark that names what it depends on
(``run_meta(depends=Depends(paths, config))``: files or folders of code and model weights, and sections of the
default configuration) gets their fingerprints recorded; :func:`stale` recomputes them, and
``tests/benchmarks/test_freshness.py`` fails for every results file whose dependencies changed since it was
measured. Benchmarks write one with :func:`write_results`; report sections read it with :func:`load_results`.
Nothing in a document is typed by hand: ``make report`` renders the markdown from these files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path

from workbench.display.rates import rate_ci  # (the sections' rate formatter: one, shared with reports and notebooks)

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"


# What benchmarks write: a results file or a rendered document changed by an earlier benchmark of the same sitting is
# output, not code, so it does not make the next measurement's tree dirty.
GENERATED = ("benchmarks/results", "BENCHMARKS.md", "RELIABILITY.md", "golden/floors.json")
_NOT_GENERATED = [".", *(f":(exclude){path}" for path in GENERATED)]


def git_commit() -> str:
    """Short commit of the working tree, with ``+dirty`` when it has uncommitted changes to tracked files other than
    the :data:`GENERATED` outputs."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *_NOT_GENERATED],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def git_diff_sha1() -> str | None:
    """sha1 of ``git diff HEAD`` (tracked files, the :data:`GENERATED` outputs aside) when the tree has uncommitted
    changes, else None."""
    try:
        diff = subprocess.run(["git", "diff", "HEAD", "--", *_NOT_GENERATED], cwd=ROOT, capture_output=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return hashlib.sha1(diff).hexdigest()[:12] if diff.strip() else None


@dataclasses.dataclass(frozen=True)
class Depends:
    """What a measurement depends on: repository paths (a folder counts every file under it, caches aside) and
    sections of the default :class:`pipeline.config.PipelineConfig` (``"gate"``, ``"validate"``, ...)."""
    paths: tuple[str, ...]
    config: tuple[str, ...] = ()


# What an answer's figures depend on: every stage that runs from ingestion to validation, the model code and weights,
# and the engine that wires them. Benchmarks of the whole answer path name these (plus their own module).
ANSWER_PATH = ("pipeline/engine.py", "pipeline/ingestion", "pipeline/text", "pipeline/retrieval",
               "pipeline/gate", "pipeline/generation", "pipeline/validation", "pipeline/models")
ANSWER_CONFIG = ("embedding", "chunking", "ingest", "keyword", "retrieve", "rerank", "gate", "rewrite", "generate",
                 "validate")
SEARCH_PATH = ("pipeline/engine.py", "pipeline/ingestion", "pipeline/text", "pipeline/retrieval",
               "pipeline/gate", "pipeline/models")
SEARCH_CONFIG = ("embedding", "chunking", "ingest", "keyword", "retrieve", "rerank", "gate")


def _files(path: str) -> list[Path]:
    full = ROOT / path
    if full.is_file():
        return [full]
    return sorted(p for p in full.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not p.name.endswith((".pyc", ".pyo")))


def fingerprint(depends: Depends) -> dict:
    """{"files": {path: sha1 of the content}, "config": {section: sha1 of its default values}}."""
    files = {}
    for path in depends.paths:
        found = _files(path)
        if not found:
            files[path] = "missing"
        for file in found:
            files[file.relative_to(ROOT).as_posix()] = hashlib.sha1(file.read_bytes()).hexdigest()[:12]
    config = {}
    if depends.config:
        from pipeline.config import PipelineConfig

        cfg = PipelineConfig()
        for section in depends.config:
            values = json.dumps(dataclasses.asdict(getattr(cfg, section)), sort_keys=True, default=str)
            config[section] = hashlib.sha1(values.encode()).hexdigest()[:12]
    return {"files": files, "config": config}


def stale(meta: dict) -> list[str]:
    """What changed since the results were measured: every dependency whose fingerprint differs now (``[]`` for a
    file that names none)."""
    recorded = meta.get("depends")
    if not recorded:
        return []
    now = fingerprint(Depends(tuple(recorded["paths"]), tuple(recorded.get("config", ()))))
    changed = []
    for kind in ("files", "config"):
        before, after = recorded.get(kind, {}), now[kind]
        changed += [f"{kind[:-1] if kind == 'files' else kind} {k}" for k in sorted(set(before) | set(after))
                    if before.get(k) != after.get(k)]
    return changed


def machine() -> str:
    """``x86_64, 2 CPUs, Linux 6.x, Python 3.11.7`` — enough to compare runs, nothing identifying."""
    return (f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run_meta(model: str, depends: Depends | None = None, **extra) -> dict:
    """The ``meta`` block: date (UTC), machine, load average now, commit (and the uncommitted diff's hash), model,
    the fingerprints of what it ``depends`` on, plus ``extra``.

    Call it at the start of a run and put ``load_average()`` into ``meta["load_average_end"]`` at the end.
    """
    meta = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
            "load_average_start": load_average(), "git_commit": git_commit(), "model": model, **extra}
    if meta["git_commit"].endswith("+dirty"):
        meta["git_diff_sha1"] = git_diff_sha1()
    if depends is not None:
        meta["depends"] = {"paths": list(depends.paths), "config": list(depends.config), **fingerprint(depends)}
    return meta


def results_path(name: str) -> Path:
    return RESULTS_DIR / f"{name}.json"


def write_results(name: str, data: dict) -> Path:
    """Write ``benchmarks/results/NAME.json`` (``data`` must carry a ``meta`` block from :func:`run_meta`)."""
    if "meta" not in data:
        raise ValueError(f"results {name!r} have no meta block (date, machine, load, commit, model)")
    data["meta"].setdefault("load_average_end", load_average())
    path = results_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")
    return path


def load_results(name: str) -> dict:
    path = results_path(name)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path.relative_to(ROOT)} is missing: run the benchmark that writes it") from None


def meta_line(meta: dict) -> str:
    """One sentence for a section: when, where, under what load, which commit and model."""
    start = meta.get("load_average_start") or []
    end = meta.get("load_average_end") or []
    load = ""
    if start:
        load = f", 1-min load average {start[0]:.1f}" + (f" at the start and {end[0]:.1f} at the end" if end else "")
    diff = (f" (uncommitted changes, diff sha1 `{meta['git_diff_sha1']}`)" if meta.get("git_diff_sha1") else
            " (uncommitted changes)" if meta.get("git_commit", "").endswith("+dirty") else "")
    return (f"Measured {meta['date']} on {meta['machine']}{load}; commit `{meta['git_commit']}`{diff}; "
            f"model: {meta['model']}.")


def mcnemar(first, second, unit: str = "cases") -> str:
    """An A-vs-B comparison of two yes/no outcomes on the same cases: the exact McNemar test, i.e. SciPy's two-sided
    ``binomtest`` on the discordant pairs — ``exact McNemar p = 0.25 (3 documents yes only in the first, 0 only in
    the second)``."""
    from workbench.metrics import paired_binary

    if len(first) != len(second):
        raise ValueError(f"a paired test needs the same cases on both sides ({len(first)} vs {len(second)})")
    t = paired_binary([bool(a) for a in first], [bool(b) for b in second])
    return (f"exact McNemar p = {t.p_value:.3g} ({t.a_only} {unit} yes only in the first, {t.b_only} only in the "
            f"second, of {t.n})")


def configured_models(cfg=None, models=None, *, generation: bool = True) -> str:
    """What a run of ``cfg`` (default: the shipped :class:`pipeline.config.PipelineConfig`) reads with, in one
    sentence for a ``model`` field or a report: the embedder, the reader, the gate rule, the generator and the
    citation check, each from the configuration and each model with where it resolves offline
    (:func:`pipeline.models.inventory.check`, which resolves what a run would load and downloads nothing) — so the
    sentence changes when the default does, and says so when a configured model is not here. With ``models`` (a
    :class:`pipeline.models.registry.Models` carrying injected models, such as :func:`pipeline.testing.fake_models`)
    the embedder, reader and NLI check it returns are named instead (loading any it does not inject). Without
    ``generation`` (a run that stops at the gate) the generator and the citation check are left out."""
    from pipeline.config import PipelineConfig
    from pipeline.models.inventory import check

    cfg = cfg or PipelineConfig()
    here = {c.key: c for c in check(cfg)}

    loaded = {}
    if models is not None:
        from pipeline.models.resolve import ModelUnavailable

        for key, load in (("embedding.model", lambda: models.embedder(cfg.embedding)),
                          ("rerank.model", lambda: models.reranker(cfg.rerank)),
                          ("validate.nli_model", lambda: models.nli(cfg.validate.nli_model))):
            try:
                obj = load()
                loaded[key] = f"`{type(obj).__name__}` ({getattr(obj, 'name', '')}, from {type(obj).__module__})"
            except ModelUnavailable as exc:
                loaded[key] = f"none ({str(exc).splitlines()[0]}: the stage is skipped)"

    def model(key: str) -> str:
        if key in loaded:
            return loaded[key]
        c = here[key]
        where = "from " + c.source.split(" (")[0] if c.available else f"{c.status} here: the stage is skipped"
        return f"`{c.name}` ({where})"

    g = cfg.gate
    if g.signal == "auto":
        gate = ("the learned gate (`gate.signal=auto`: the learned combination of the evidence signals, the reader's "
                "best sentence score among them where the reader ran)")
    else:
        threshold = getattr(g, f"confidence_threshold_{g.signal}", None)
        gate = f"`gate.signal={g.signal}`" + (f" at threshold {threshold}" if threshold is not None else "")
    reader = (f"reader {model('rerank.model')} over {cfg.rerank.granularity}s, {cfg.rerank.candidates} candidates"
              if cfg.rerank.enabled else "no reader (`rerank.enabled=false`)")
    if not generation:
        return f"embedder {model('embedding.model')}, {reader}, {gate}; retrieve, rerank and gate only (no generation)"
    gen = cfg.generate.backend
    generator = ("the extractive generator" if gen == "extractive" else
                 f"the local LLM {model('generate.model')}" if gen == "local" else
                 f"the litellm model `{cfg.generate.model}`")
    if not cfg.validate.enabled:
        validation = "no citation check (`validate.enabled=false`)"
    elif cfg.validate.nli == "off":
        validation = "the embedding citation check alone (`validate.nli=off`)"
    else:
        validation = f"the NLI citation check {model('validate.nli_model')} (`validate.nli={cfg.validate.nli}`)"
    return (f"embedder {model('embedding.model')}, {reader}, {gate}, {generator}, {validation}")


def pair_ci(rates: dict) -> str:
    """``58.0 % [48.2–67.2] / 6.0 % [2.1–16.2]``: answered (of answerable) / false answers (of unanswerable) with their
    Wilson intervals, from a dict holding both rates and the ``answerable`` / ``unanswerable`` counts."""
    return (f"{rate_ci(rates.get('answer_rate_answerable'), rates.get('answerable', 0))} / "
            f"{rate_ci(rates.get('false_answer_rate_unanswerable'), rates.get('unanswerable', 0))}")
