"""Ingestion: files in, indexed chunks out.

In: paths or :class:`~pipeline.ingestion.documents.Document` objects (Markdown, text, HTML, JSONL with optional
front matter). Out: chunks written to the store (dense vector, BM25 sparse vector, catalogue row, the
validator's passage vectors) and an ingest report (``documents``, ``chunks``, ``embedded``, ``deleted``,
``corpus_version``).

- ``documents.py``: the Document/Chunk types and the loaders (text normalised: invisible and look-alike
  characters, hidden HTML dropped); ``html.py``: HTML to Markdown.
- ``files.py``: the folder walk (iterative; symlinks out of the folder refused), decoding by byte-order mark,
  escaped file names; ``normalise.py``: invisible (Cf) and look-alike characters; ``markdown.py``: comments and
  hidden raw HTML dropped from Markdown; ``css.py``: whether an HTML element is hidden.
- ``chunking.py``: structure-aware chunking (headings, lists, tables and code kept whole).
- ``supersede.py``: which chunks a newer version of the same document supersedes.
- ``ingest.py``: the driver: load, chunk, embed in batches, write, supersede, repair a damaged index.
"""
