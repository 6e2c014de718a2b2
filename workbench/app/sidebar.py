"""The configuration sidebar: every tunable of ``PipelineConfig``, built from ``pipeline.config.tunables()``.

One widget per tunable, keyed ``sidebar.<stage>.<key>``, grouped per stage; provisional values are marked.
The values live in Session State under ``config.<stage>.<key>`` as well, because Streamlit forgets a
widget's value when the page that drew it is left; each page redraws the sidebar from those copies, so the
configuration survives page switches. Reset, export and import act on those values; the config hash of what
the sidebar shows is always on screen.
"""

from __future__ import annotations

import streamlit as st

from pipeline.config import ConfigError, PipelineConfig, Tunable, get_value, tunables
from workbench.app.render import md

IMPORT_ERROR = "sidebar.import_error"
LAST_VALID = "config.last_valid"


def widget_key(tunable_key: str) -> str:
    return f"sidebar.{tunable_key}"


def value_key(tunable_key: str) -> str:
    return f"config.{tunable_key}"


def _set_all(cfg: PipelineConfig) -> None:
    for t in tunables():
        st.session_state[value_key(t.key)] = get_value(cfg, t.key)


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


def _widget(t: Tunable) -> None:
    wkey = widget_key(t.key)
    # The widget of another page is another widget: seed this one from the kept value on every run (a
    # user's edit reaches the kept value first, through on_change, which runs before the script).
    st.session_state[wkey] = st.session_state.get(value_key(t.key), t.default)
    name = t.key.split(".", 1)[1] + (" (provisional)" if t.provisional else "")
    help_text = t.help + (" Provisional: a seed value, to be replaced by what tuning recommends."
                          if t.provisional else "")
    common = dict(key=wkey, help=help_text, on_change=_keep, args=(t.key,))
    if t.type == "bool":
        st.checkbox(name, **common)
    elif t.type == "choice":
        st.selectbox(name, list(t.choices), **common)
    elif t.type == "int":
        st.number_input(name, min_value=None if t.lo is None else int(t.lo),
                        max_value=None if t.hi is None else int(t.hi), step=1, **common)
    elif t.type == "float":
        span = (t.hi - t.lo) if t.lo is not None and t.hi is not None else 10.0
        st.number_input(name, min_value=None if t.lo is None else float(t.lo),
                        max_value=None if t.hi is None else float(t.hi), step=0.001 if span <= 2 else 0.1,
                        format="%.4f", **common)
    else:
        st.text_input(name, **common)


def current_values() -> dict[str, object]:
    """Every tunable's value as the sidebar holds it (defaults for those never shown)."""
    return {t.key: st.session_state.get(value_key(t.key), t.default) for t in tunables()}


def config_from_state() -> PipelineConfig:
    """The config the sidebar describes; raises ConfigError when the values do not form a valid config."""
    return PipelineConfig().with_overrides(current_values())


def render_sidebar() -> PipelineConfig:
    """Draw the sidebar and return the configuration to run with.

    Invalid combinations (``rerank.top_k`` above ``rerank.candidates``) are shown as one ``st.error`` line
    and the last valid configuration is used until they are fixed.
    """
    sidebar = st.sidebar
    sidebar.header("Configuration")
    by_stage: dict[str, list[Tunable]] = {}
    for t in tunables():
        by_stage.setdefault(t.key.split(".", 1)[0], []).append(t)
    with sidebar:
        for stage, items in by_stage.items():
            provisional = any(t.provisional for t in items)
            with st.expander(stage + (" · provisional values" if provisional else ""), expanded=stage == "gate"):
                for t in items:
                    _widget(t)
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
    changed = sum(1 for t in tunables() if get_value(cfg, t.key) != t.default)
    sidebar.markdown(f"config hash `{cfg.config_hash()}` · {changed} setting(s) changed from the defaults")
    left, right = sidebar.columns(2)
    left.button("Reset to defaults", key="sidebar.reset", on_click=_reset)
    right.download_button("Export JSON", cfg.to_json(), file_name=f"config-{cfg.config_hash()}.json",
                          mime="application/json", key="sidebar.export")
    sidebar.file_uploader("Import config JSON", type=["json"], key="sidebar.import", on_change=_import)
    if st.session_state.get(IMPORT_ERROR):
        sidebar.error(md(f"Config not imported: {st.session_state[IMPORT_ERROR]}"))
    return cfg
