"""The sidebar's "Models" panel: which models the configuration names, which resolved, and what each missing
one changes (:mod:`pipeline.models.inventory`; ``make models`` fetches the missing ones where the network allows)."""

from __future__ import annotations

import streamlit as st

from pipeline.config import PipelineConfig
from pipeline.models.inventory import ModelCheck, check
from workbench.app.render import md


@st.cache_data(show_spinner=False, ttl=60)
def _checks(config_json: str) -> tuple[ModelCheck, ...]:
    return check(PipelineConfig.from_json(config_json))


def summary(checks: tuple[ModelCheck, ...]) -> str:
    """The expander's label: how many of the models in use resolved."""
    used = [c for c in checks if c.status != "not used"]
    here = sum(c.available for c in used)
    return f"Models: {here} of {len(used)} here" + ("" if here == len(used) else " · make models")


def render_models(cfg: PipelineConfig) -> None:
    checks = _checks(cfg.to_json())
    with st.sidebar.expander(md(summary(checks))):
        for c in checks:
            if c.available:
                st.markdown(md(f"✓ {c.role}: {c.name} ({c.source})"))
            elif c.status == "not used":
                st.caption(md(f"– {c.role}: not used by this configuration ({c.detail})"))
            else:
                st.markdown(md(f"✗ {c.role}: {c.name} is not here"))
                st.caption(md(f"Without it: {c.without}. {c.detail}."))
