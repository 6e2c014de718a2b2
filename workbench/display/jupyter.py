"""Register the workbench's displays with IPython, so a notebook that shows a ``Trace`` or an ``Evaluation``
gets the escaped HTML tables of :mod:`workbench.display.trace_html` and :mod:`workbench.display.eval_html`
(and their plain-text forms in a terminal IPython).

``pipeline/`` carries no presentation code: its records are plain dataclasses, and this module attaches the
display by type name, so registering imports neither the records nor IPython. ``import workbench`` calls
:func:`register` when it runs inside IPython; outside it (CLI, app, tests) it does nothing.
"""

from __future__ import annotations

import sys
from typing import Any

_TRACE = ("pipeline.trace", "Trace")
_EVALUATION = ("workbench.evaluate", "Evaluation")


def _trace_html(trace: Any) -> str:
    from workbench.display.trace_html import trace_html

    return trace_html(trace)


def _trace_text(trace: Any, printer: Any, cycle: bool) -> None:
    from workbench.display.trace_html import trace_text

    printer.text(trace_text(trace))


def _evaluation_html(evaluation: Any) -> str:
    from workbench.display.eval_html import evaluation_html

    return evaluation_html(evaluation.summary, evaluation.rows)


def _evaluation_text(evaluation: Any, printer: Any, cycle: bool) -> None:
    from workbench.display.eval_html import evaluation_text

    printer.text(evaluation_text(evaluation.summary, evaluation.rows))


def register(shell: Any = None) -> bool:
    """Attach the HTML and text displays to ``shell`` (default: the running IPython); False outside IPython."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    formatters = shell.display_formatter.formatters
    for (module, name), html_fn, text_fn in ((_TRACE, _trace_html, _trace_text),
                                             (_EVALUATION, _evaluation_html, _evaluation_text)):
        formatters["text/html"].for_type_by_name(module, name, html_fn)
        formatters["text/plain"].for_type_by_name(module, name, text_fn)
    return True
