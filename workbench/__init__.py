"""The research layer: evaluation, sweeps, comparison, figures, the CLI and the Streamlit app's helpers."""
