"""Presentation of pipeline records outside Streamlit: escaped HTML and plain text for a Trace
(:mod:`~workbench.display.trace_html`) and an evaluation (:mod:`~workbench.display.eval_html`), and their
registration with Jupyter (:mod:`~workbench.display.jupyter`). ``pipeline/`` holds no presentation code;
the app's palette and chips come from here too, so the app and the notebooks colour verdicts alike."""
