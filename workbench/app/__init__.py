"""The Streamlit workbench (``streamlit_app.py``): pages under ``pages/``, models and the store in
``resources`` (the only place they are loaded), escaping and colours in ``render``."""
