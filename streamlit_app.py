"""The research workbench: ``streamlit run streamlit_app.py`` (``make app`` ingests the demo corpus first)."""

import streamlit as st

st.set_page_config(page_title="RAG workbench", page_icon=":material/search:", layout="wide")

PAGES = "workbench/app/pages"
st.navigation([
    st.Page(f"{PAGES}/ask.py", title="Ask", icon=":material/chat:", default=True),
    st.Page(f"{PAGES}/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page(f"{PAGES}/gate_lab.py", title="Gate lab", icon=":material/traffic:", url_path="gate-lab"),
    st.Page(f"{PAGES}/evaluate.py", title="Evaluate & tune", icon=":material/monitoring:", url_path="evaluate"),
    st.Page(f"{PAGES}/corpus.py", title="Corpus", icon=":material/library_books:", url_path="corpus"),
    st.Page(f"{PAGES}/runs.py", title="Runs", icon=":material/history:", url_path="runs"),
    st.Page(f"{PAGES}/monitor.py", title="Monitor", icon=":material/monitor_heart:", url_path="monitor"),
    st.Page(f"{PAGES}/tour.py", title="Demo tour", icon=":material/slideshow:", url_path="tour"),
]).run()
