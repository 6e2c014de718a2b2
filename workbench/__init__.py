"""The research layer: evaluation, sweeps, comparison, figures, the CLI, displays and the Streamlit app's helpers."""

from workbench.display.jupyter import register as _register_jupyter_display

_register_jupyter_display()  # a no-op outside IPython
