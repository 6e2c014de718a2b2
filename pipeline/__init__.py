"""The answerer: hybrid retrieval, rerank, confidence gate, cited generation and citation validation.

No Streamlit and no plotting here; the CLI, the app and the notebooks all import this package.
"""
