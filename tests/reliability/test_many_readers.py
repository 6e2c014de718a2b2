"""The design card's users on one store at once: the Streamlit app's store holder, a notebook reading through
the package, ten ``workbench ask`` commands started together and an ingest in the middle of it all. Every
reader answers from the shard the app holds (pipeline/storage/share.py), the ingest completes, and nothing
is lost or damaged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.ingestion.ingest import needs_repair
from pipeline.storage.store import Store
from tests.reliability.rel_support import CLI_ENV, ROOT

ASKS = 10
QUESTION = "What does ERR_TIMEOUT_502 mean?"

# The app's own resources (as `make app` opens them): its cached store and pipeline, held until told to quit.
APP_HOLDER = textwrap.dedent("""
    import json, sys
    from workbench.app import resources
    pipeline = resources.pipeline()
    print(json.dumps({"ready": True, "served_by": pipeline.store.served_by}), flush=True)
    for line in sys.stdin:
        if line.strip() == "ask":
            trace = pipeline.ask(sys.argv[1])
            print(json.dumps([c.doc_id for c in trace.retrieval.candidates]), flush=True)
        else:
            break
    pipeline.store.close()
    print(json.dumps({"closed": True}), flush=True)
""")

# A notebook's cells: open the store through the package and ask.
NOTEBOOK = textwrap.dedent("""
    import json, sys
    from pipeline.engine import Pipeline
    from pipeline.models.registry import default_models
    from pipeline.storage.store import Store
    with Store.open(sys.argv[1]) as store:
        trace = Pipeline(store, default_models()).ask(sys.argv[2])
        print(json.dumps({"served_by": store.served_by, "docs": [c.doc_id for c in trace.retrieval.candidates]}))
""")


def _env(home: Path) -> dict:
    return {**CLI_ENV, "WORKBENCH_HOME": str(home), "WORKBENCH_LOCK_WAIT_S": "30"}


def _start(args: list[str], home: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=ROOT, env=_env(home), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


@pytest.mark.slow
@pytest.mark.long
def test_the_app_a_notebook_ten_cli_asks_and_an_ingest_share_one_store(cli_store, tmp_path):
    home = tmp_path / "store"
    shutil.copytree(cli_store, home)
    extra = tmp_path / "extra.md"
    extra.write_text("---\nid: relay-port\ntitle: Relay port\n---\n# Relay port\n\nThe relay listens on port 7443 "
                     "by default.\n", encoding="utf-8")

    app = _start([sys.executable, "-c", APP_HOLDER, QUESTION], home, stdin=subprocess.PIPE)
    try:
        ready = json.loads(app.stdout.readline() or "{}")
        assert ready.get("ready") and ready["served_by"] == "", app.stderr.read() if app.poll() is not None else ready
        cli = [sys.executable, "-m", "workbench.cli"]
        asks = [_start([*cli, "ask", QUESTION, "--store", str(home), "--json"], home) for _ in range(ASKS)]
        notebook = _start([sys.executable, "-c", NOTEBOOK, str(home), QUESTION], home)
        ingest = _start([*cli, "ingest", str(extra), "--store", str(home), "--json"], home)
        app.stdin.write("ask\n")
        app.stdin.flush()
        assert "err-timeout-502" in json.loads(app.stdout.readline()), "the app answers while the others run"

        for proc in asks:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0 and "Traceback" not in err, err
            trace = json.loads(out)
            assert "err-timeout-502" in {c["doc_id"] for c in trace["retrieval"]["candidates"]}
        out, err = notebook.communicate(timeout=600)
        assert notebook.returncode == 0, err
        read = json.loads(out)
        assert read["served_by"].startswith(f"pid {app.pid}") and "err-timeout-502" in read["docs"]
        out, err = ingest.communicate(timeout=600)
        assert ingest.returncode == 0, err
        assert json.loads(out)["added"] == ["relay-port"]

        app.stdin.write("quit\n")
        app.stdin.flush()
        assert json.loads(app.stdout.readline()) == {"closed": True}
        assert app.wait(timeout=60) == 0
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(timeout=30)
    with Store.open(home) as store:
        assert store.damage == "" and not needs_repair(store)
        assert {d.doc_id for d in store.documents()} >= {"err-timeout-502", "relay-port"}
        assert store.index.count() == store.chunk_count() == sum(d.chunk_count for d in store.documents())
        assert store.orphan_points() == [] and store.missing_points() == []
