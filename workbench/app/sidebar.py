"""The configuration sidebar: every tunable of ``PipelineConfig``, built from ``pipeline.config.tunables()``.

One widget per tunable, keyed ``sidebar.<stage>.<key>``. The few settings people change first (the gate, the
generator, rerank, rewrite, the cache: :data:`MAIN`, plus the threshold of a single-signal gate rule while it is
the rule chosen: :func:`main_keys`) are on top; the rest are under "Advanced", grouped per stage. Every widget
has a human label (:data:`LABELS`) and the config key in its help; provisional values are marked. Gate
thresholds get their signal's range, step and precision (``workbench.app.thresholds``), and a warning when
the fusion settings make a fused threshold unreachable or change what it means.
The values live in Session State under ``config.<stage>.<key>`` as well, because Streamlit forgets a
widget's value when the page that drew it is left; each page redraws the sidebar from those copies, so the
configuration survives page switches. Reset, export and import act on those values; the config hash of what
the sidebar shows is always on screen.
"""

from __future__ import annotations

import streamlit as st

from pipeline.config import ConfigError, PipelineConfig, Tunable, get_value, tunables
from workbench.app import thresholds
from workbench.app.render import md

IMPORT_ERROR = "sidebar.import_error"
LAST_VALID = "config.last_valid"

MAIN = ("gate.signal", "gate.confidence_threshold_rerank", "gate.confidence_threshold_learned",
        "gate.confidence_threshold_fused", "gate.confidence_threshold_dense", "generate.backend", "generate.model",
        "rerank.enabled", "rewrite.backend", "cache.enabled")
LABELS = {
    "rerank.granularity": "Rerank reads (sentence: the reader; passage)",
    "rerank.order": "Candidate order after the reader",
    "rerank.blend_k": "Blend order RRF constant k",
    "rerank.max_sentences": "Sentences read per candidate",
    "generate.reader_min_score": "Reader score a quoted sentence needs",
    "gate.learned_r_intercept": "Learned rule with reader: intercept",
    "gate.learned_r_window": "Learned rule with reader: window weight",
    "gate.learned_r_coverage": "Learned rule with reader: coverage weight",
    "gate.learned_r_critical": "Learned rule with reader: critical-term weight",
    "gate.learned_r_bm25": "Learned rule with reader: BM25 weight",
    "gate.learned_r_dense": "Learned rule with reader: dense weight",
    "gate.learned_r_dense_margin": "Learned rule with reader: dense margin weight",
    "gate.learned_r_fused_norm": "Learned rule with reader: fused weight",
    "gate.learned_r_reader": "Learned rule with reader: reader weight",
    "chunking.max_tokens": "Chunk size (words)", "chunking.overlap_tokens": "Chunk overlap (words)",
    "embedding.model": "Embedding model", "embedding.batch_size": "Embedding batch size",
    "embedding.precision": "Embedding precision",
    "keyword.k1": "BM25 k1 (term saturation)", "keyword.b": "BM25 b (length normalisation)",
    "keyword.heading_weight": "Heading (title) weight in BM25",
    "ingest.passage_vectors_mode": "Passage vectors from",
    "ingest.supersede_similarity": "Supersession similarity", "ingest.batch_chunks": "Chunks per ingest batch",
    "ingest.passage_vectors": "Embed passages at ingestion",
    "retrieve.dense_top_k": "Dense candidates", "retrieve.keyword_top_k": "Keyword candidates",
    "retrieve.rrf_k": "Fusion constant k (RRF)", "retrieve.dense_weight": "Dense leg weight",
    "retrieve.keyword_weight": "Keyword leg weight", "retrieve.fusion": "Fusion method",
    "retrieve.convex_dense_weight": "Convex fusion: dense share",
    "retrieve.convex_normalisation": "Convex fusion: score normalisation",
    "rerank.enabled": "Rerank with the cross-encoder", "rerank.model": "Cross-encoder model",
    "rerank.candidates": "Candidates reranked", "rerank.top_k": "Kept after reranking",
    "rerank.max_tokens": "Rerank max tokens", "rerank.precision": "Rerank precision",
    "rerank.batch_size": "Rerank batch size", "rerank.early_stop": "Stop reranking early",
    "gate.signal": "Gate rule", "gate.confidence_threshold_rerank": "Rerank threshold",
    "gate.confidence_threshold_fused": "Fused (RRF) threshold",
    "gate.confidence_threshold_dense": "Dense cosine threshold",
    "gate.confidence_threshold_learned": "Learned rule threshold",
    **{f"gate.{thresholds.FIELD[name]}": thresholds.LABEL[name] for name in thresholds.EVIDENCE},
    "gate.learned_intercept": "Learned rule: intercept", "gate.learned_window": "Learned rule: sentence-window weight",
    "gate.learned_coverage": "Learned rule: term-coverage weight",
    "gate.learned_critical": "Learned rule: critical-term weight", "gate.learned_bm25": "Learned rule: BM25 weight",
    "gate.learned_dense": "Learned rule: dense-cosine weight",
    "gate.learned_dense_margin": "Learned rule: dense-margin weight",
    "gate.learned_fused_norm": "Learned rule: fused-score weight",
    "gate.closest_documents": "Closest documents shown",
    "rewrite.backend": "Follow-up rewriting", "rewrite.model": "Rewrite model",
    "rewrite.api_base": "Rewrite API base URL",
    "rewrite.timeout_s": "Rewrite timeout (s)", "rewrite.temperature": "Rewrite temperature",
    "rewrite.query_rewrite_history_turns": "History turns used", "rewrite.max_chars": "Longest rewrite (chars)",
    "rewrite.max_growth": "Largest rewrite growth (×)", "rewrite.long_chars": "… when at least (chars)",
    "generate.backend": "Answer generator", "generate.model": "LLM model (litellm)",
    "generate.api_base": "LLM API base URL", "generate.timeout_s": "LLM timeout (s)", "generate.retries": "LLM retries",
    "generate.llm_temperature": "LLM temperature", "generate.max_output_tokens": "Longest reply (tokens)",
    "generate.max_sources": "Sources offered", "generate.tiers": "Generation tiers (JSON list)",
    "generate.escalate_on": "Escalate to the next tier on",
    "generate.extractive_sentences": "Sentences quoted (extractive)",
    "validate.enabled": "Check citations (validator)", "validate.claim_threshold": "Claim support threshold",
    "validate.misattribution_margin": "Misattribution margin",
    "validate.match": "Match claims against",
    "validate.encode_batch_size": "Validation batch size", "validate.nli_model": "NLI model (citation check)",
    "validate.nli": "NLI decides support",
    "cache.enabled": "Answer cache",
}


def main_keys(signal: str) -> tuple[str, ...]:
    """The settings on top for the gate rule ``signal``: :data:`MAIN`, and a single-signal rule's threshold right
    under the rule while that rule is chosen (it is under "Advanced" otherwise)."""
    if signal not in thresholds.EVIDENCE:
        return MAIN
    after = MAIN.index("gate.signal") + 1
    return (*MAIN[:after], f"gate.{thresholds.FIELD[signal]}", *MAIN[after:])


def widget_key(tunable_key: str) -> str:
    return f"sidebar.{tunable_key}"


def value_key(tunable_key: str) -> str:
    return f"config.{tunable_key}"


def _set_all(cfg: PipelineConfig) -> None:
    for t in tunables():
        st.session_state[value_key(t.key)] = get_value(cfg, t.key)


def load_config(cfg: PipelineConfig) -> None:
    """Make ``cfg`` the session's configuration (the sidebar shows it from the next run on)."""
    _set_all(cfg)


def _reset() -> None:
    _set_all(PipelineConfig())
    st.session_state.pop(IMPORT_ERROR, None)


def _import() -> None:
    uploaded = st.session_state.get("sidebar.import")
    if uploaded is None:
        return
    try:
        text = uploaded.getvalue().decode("utf-8-sig")
        cfg = PipelineConfig.from_json(text)
    except UnicodeDecodeError:
        st.session_state[IMPORT_ERROR] = f"{uploaded.name} is not UTF-8 text; export a config and edit that"
        return
    except ConfigError as exc:
        st.session_state[IMPORT_ERROR] = f"{uploaded.name}: {exc}"
        return
    _set_all(cfg)
    st.session_state.pop(IMPORT_ERROR, None)


def _keep(tunable_key: str) -> None:
    st.session_state[value_key(tunable_key)] = st.session_state[widget_key(tunable_key)]


def label(t: Tunable) -> str:
    name = LABELS.get(t.key) or t.key.split(".", 1)[1].replace("_", " ").capitalize()
    return name + (" (provisional)" if t.provisional else "")


def _float_step(t: Tunable) -> tuple[float, str]:
    """A step and format for a float that is not a gate threshold: finer for narrow ranges."""
    span = (t.hi - t.lo) if t.lo is not None and t.hi is not None else 10.0
    if span > 50:
        return 0.5, "%.1f"
    if span > 2:
        return 0.1, "%.2f"
    return 0.01, "%.2f"


def _widget(t: Tunable, notes: dict[str, str]) -> None:
    wkey = widget_key(t.key)
    # The widget of another page is another widget: seed this one from the kept value on every run (a
    # user's edit reaches the kept value first, through on_change, which runs before the script).
    st.session_state[wkey] = st.session_state.get(value_key(t.key), t.default)
    help_text = t.help + (" Provisional: a seed value, to be replaced by what tuning recommends."
                          if t.provisional else "")
    signal = next((name for name, field in thresholds.FIELD.items() if t.key == f"gate.{field}"), None)
    if signal is not None:
        spec = thresholds.spec(signal, _retrieve_now(), current=st.session_state[wkey])
        help_text += " " + spec.help
    help_text += f"  \nConfig key: `{t.key}`"
    common = dict(key=wkey, help=help_text, on_change=_keep, args=(t.key,))
    if t.type == "bool":
        st.checkbox(label(t), **common)
    elif t.type == "choice":
        st.selectbox(label(t), list(t.choices), **common)
    elif t.type == "int":
        st.number_input(label(t), min_value=None if t.lo is None else int(t.lo),
                        max_value=None if t.hi is None else int(t.hi), step=1, **common)
    elif signal is not None:
        st.number_input(label(t), min_value=spec.lo, max_value=spec.hi, step=spec.step, format=spec.format, **common)
    elif t.type == "float":
        step, fmt = _float_step(t)
        st.number_input(label(t), min_value=None if t.lo is None else float(t.lo),
                        max_value=None if t.hi is None else float(t.hi), step=step, format=fmt, **common)
    else:
        st.text_input(label(t), **common)
    if notes.get(t.key):
        st.caption(md(notes[t.key]))


def _retrieve_now():
    """The fusion settings the sidebar holds now (the fused threshold's range depends on them)."""
    values = current_values()
    try:
        return PipelineConfig().with_overrides({k: v for k, v in values.items() if k.startswith("retrieve.")}).retrieve
    except ConfigError:
        return PipelineConfig().retrieve


def current_values() -> dict[str, object]:
    """Every tunable's value as the sidebar holds it (defaults for those never shown)."""
    return {t.key: st.session_state.get(value_key(t.key), t.default) for t in tunables()}


def config_from_state() -> PipelineConfig:
    """The config the sidebar describes; raises ConfigError when the values do not form a valid config."""
    return PipelineConfig().with_overrides(current_values())


def state_config() -> PipelineConfig:
    """The configuration the session holds (the last valid one when the values do not form one); for use
    before the sidebar is drawn."""
    try:
        return config_from_state()
    except ConfigError:
        return PipelineConfig.from_json(st.session_state[LAST_VALID]) if LAST_VALID in st.session_state \
            else PipelineConfig()


def render_sidebar(notes: dict[str, str] | None = None) -> PipelineConfig:
    """Draw the sidebar and return the configuration to run with; ``notes`` adds a line under a setting's
    widget (``{"rerank.enabled": "model not installed ..."}``).

    Invalid combinations (``rerank.top_k`` above ``rerank.candidates``) are shown as one ``st.error`` line
    and the last valid configuration is used until they are fixed.
    """
    notes = notes or {}
    sidebar = st.sidebar
    sidebar.header("Configuration")
    by_key = {t.key: t for t in tunables()}
    main = main_keys(str(st.session_state.get(value_key("gate.signal"), by_key["gate.signal"].default)))
    by_stage: dict[str, list[Tunable]] = {}
    for t in tunables():
        if t.key not in main:
            by_stage.setdefault(t.key.split(".", 1)[0], []).append(t)
    with sidebar:
        for key in main:
            if key in by_key:
                _widget(by_key[key], notes)
        st.markdown("**Advanced**")
        for stage, items in by_stage.items():
            provisional = any(t.provisional for t in items)
            with st.expander(stage + (" · provisional values" if provisional else "")):
                for t in items:
                    _widget(t, notes)
    try:
        cfg = config_from_state()
        st.session_state[LAST_VALID] = cfg.to_json()
        invalid = ""
    except ConfigError as exc:
        invalid = str(exc)
        cfg = PipelineConfig.from_json(st.session_state[LAST_VALID]) if LAST_VALID in st.session_state \
            else PipelineConfig()
    if invalid:
        sidebar.error(md(f"Invalid configuration: {invalid}. Using the last valid one ({cfg.config_hash()})."))
    for warning in thresholds.scale_warnings(cfg):
        sidebar.warning(md(warning))
    changed = sum(1 for t in tunables() if get_value(cfg, t.key) != t.default)
    sidebar.markdown(f"config hash `{cfg.config_hash()}` · {changed} setting(s) changed from the defaults")
    sidebar.button("Reset all settings to defaults", key="sidebar.reset", on_click=_reset, width="stretch")
    sidebar.download_button("Export the configuration (JSON)", cfg.to_json(),
                            file_name=f"config-{cfg.config_hash()}.json", mime="application/json",
                            key="sidebar.export", width="stretch")
    sidebar.file_uploader("Import config JSON", type=["json"], key="sidebar.import", on_change=_import)
    if st.session_state.get(IMPORT_ERROR):
        sidebar.error(md(f"Config not imported: {st.session_state[IMPORT_ERROR]}"))
    return cfg
