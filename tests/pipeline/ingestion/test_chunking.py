"""Structure-aware chunking: heading paths, whole tables/lists/code, row-wise table splits, overlap."""

from pipeline.config import ChunkingConfig
from pipeline.ingestion.chunking import chunk_document, parse_blocks, split_sentences
from pipeline.ingestion.documents import Document


def doc(text: str, title: str = "Delivery guide") -> Document:
    return Document(doc_id="d", title=title, text=text, source="t.md", format="md")


def prose(n: int, word: str = "word") -> str:
    return " ".join(f"{word}{i}." if i % 12 == 11 else f"{word}{i}" for i in range(n))


def test_heading_path_goes_into_every_chunk():
    text = "# Delivery guide\n\n## Retries\n\nRetries back off.\n\n### Limits\n\nAt most 8.\n\n## Timeouts\n\nSet it."
    chunks = chunk_document(doc(text), ChunkingConfig(max_tokens=200))
    assert [c.heading_path for c in chunks] == [("Delivery guide", "Retries"), ("Delivery guide", "Timeouts")]
    # a level-3 heading stays inside its section's chunk, as text
    assert "### Limits" in chunks[0].text and "At most 8." in chunks[0].text
    assert chunks[0].indexed_text.startswith("Delivery guide > Retries\n")


def test_a_code_block_is_never_split_even_when_oversized():
    code = "```toml\n" + "\n".join(f"key_{i} = {i}" for i in range(120)) + "\n```"
    text = f"## Config\n\n{prose(30)}\n\n{code}\n\n{prose(30, 'after')}"
    chunks = chunk_document(doc(text), ChunkingConfig(max_tokens=60, overlap_tokens=0))
    holding = [c for c in chunks if "key_0 = 0" in c.text]
    assert len(holding) == 1 and "key_119 = 119" in holding[0].text and holding[0].text.count("```") == 2


def test_an_oversized_table_is_split_by_rows_with_its_header_repeated():
    rows = "\n".join(f"| `delivery.key_{i}` | integer | {i} | setting number {i} |" for i in range(60))
    table = "| key | type | default | description |\n| --- | --- | --- | --- |\n" + rows
    chunks = chunk_document(doc(f"## Reference\n\n{table}"), ChunkingConfig(max_tokens=80, overlap_tokens=0))
    assert len(chunks) > 1
    for c in chunks:
        assert c.kind == "table"
        assert c.text.startswith("| key | type | default | description |\n| --- | --- | --- | --- |\n")
    all_rows = [line for c in chunks for line in c.text.split("\n")[2:]]
    assert all_rows == rows.split("\n")  # every row once, in order, none cut


def test_a_list_is_kept_whole_and_a_huge_one_splits_only_between_items():
    items = "\n".join(f"{i}. Run `harborctl step {i}` and wait\n   for the prompt" for i in range(1, 9))
    chunks = chunk_document(doc(f"## Steps\n\n{prose(50)}\n\n{items}"), ChunkingConfig(max_tokens=60, overlap_tokens=0))
    assert sum("harborctl step" in c.text for c in chunks) == 1
    huge = "\n".join(f"- item {i} with a few more words here" for i in range(200))
    chunks = chunk_document(doc(f"## Many\n\n{huge}"), ChunkingConfig(max_tokens=50, overlap_tokens=0))
    assert len(chunks) > 1
    for c in chunks:
        assert all(line.startswith("- item ") for line in c.text.split("\n"))


def test_long_prose_splits_at_sentences_and_consecutive_chunks_overlap():
    sentences = [f"Sentence number {i} explains one more detail of the retry policy." for i in range(40)]
    chunks = chunk_document(doc("## Policy\n\n" + " ".join(sentences)), ChunkingConfig(max_tokens=60, overlap_tokens=15))
    assert len(chunks) > 2
    for c in chunks:
        assert c.text.endswith(".")
    first_of_second = split_sentences(chunks[1].text.replace("\n\n", " "))[0]
    assert chunks[0].text.endswith(first_of_second)  # the overlap is whole trailing sentences of the previous chunk


def test_sentence_splitting_respects_abbreviations_versions_and_codes():
    text = "Use e.g. a proxy. Version v3.1 raised it to 1.5 s. ERR_TIMEOUT_502 follows. Done."
    assert split_sentences(text) == ["Use e.g. a proxy.", "Version v3.1 raised it to 1.5 s.",
                                     "ERR_TIMEOUT_502 follows.", "Done."]


def test_blocks_are_recognised():
    kinds = [b.kind for b in parse_blocks("# T\n\nPara\nline two\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n"
                                          "```\ncode\n```\n\n> quoted")]
    assert kinds == ["heading", "prose", "list", "table", "code", "quote"]


def test_chunk_ids_are_stable_and_ordered():
    chunks = chunk_document(doc("## A\n\none\n\n## B\n\ntwo"), ChunkingConfig())
    assert [c.chunk_id for c in chunks] == ["d#0", "d#1"]


def test_a_heading_with_nothing_under_it_stays_searchable():
    text = "## Contact\n## Retries\n\nRetries back off.\n\n## See also ERR_TIMEOUT_502"
    chunks = chunk_document(doc(text), ChunkingConfig(max_tokens=200))
    indexed = " ".join(c.indexed_text for c in chunks)
    assert "Contact" in indexed and "ERR_TIMEOUT_502" in indexed and "Retries back off." in indexed
    assert chunk_document(doc("## Only a heading"), ChunkingConfig()) != []


def test_a_heading_keeps_a_closing_hash_that_is_part_of_a_word():
    blocks = parse_blocks("## Using C#\n\n## Retries ##\n\n#  \t")
    assert [(b.kind, b.text) for b in blocks[:2]] == [("heading", "Using C#"), ("heading", "Retries")]
