"""What a notebook shows for an object: IPython's own formatters, with the workbench's displays registered."""

from __future__ import annotations

from types import SimpleNamespace

from workbench.display.jupyter import register


def displayed(obj) -> dict[str, str]:
    """The MIME bundle IPython would render for ``obj`` (``text/html``, ``text/plain``)."""
    from IPython.core.formatters import DisplayFormatter

    shell = SimpleNamespace(display_formatter=DisplayFormatter())
    assert register(shell)
    data, _ = shell.display_formatter.format(obj)
    return data
