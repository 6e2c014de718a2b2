"""The house rules of docs/ARCHITECTURE.md that a test can hold: no import cycles anywhere (function-level
imports included), ``pipeline/`` never reaches into the research layer or presentation libraries, and every
stage family says in its ``__init__`` docstring what flows in and out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "workbench")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Project modules ``name`` imports anywhere in its body (module level or inside functions)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # "pipeline.models.registry.Models" -> the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, set(modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_anywhere():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    assert "pipeline.models.local_llm" in graph["pipeline.models.registry"]
    assert "workbench.display.trace_html" in graph["workbench.display.jupyter"]  # imported inside functions


@pytest.mark.parametrize("module", sorted(m for m in _modules() if m.startswith("pipeline")))
def test_pipeline_never_imports_the_research_layer_or_presentation_libraries(module):
    path = _modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    banned = {n for n in names if n.split(".")[0] in ("workbench", "streamlit", "plotly", "IPython")}
    assert not banned, f"{module} imports {sorted(banned)}"


def stage_families() -> list[Path]:
    return sorted(p for p in (ROOT / "pipeline").iterdir() if (p / "__init__.py").is_file())


def test_every_stage_family_says_what_flows_in_and_out_and_imports_nothing():
    families = stage_families()
    assert {p.name for p in families} >= {"ingestion", "retrieval", "gate", "generation", "validation", "storage",
                                          "models", "text"}
    for family in families:
        tree = ast.parse((family / "__init__.py").read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree) or ""
        assert len(doc) > 80, f"pipeline/{family.name}/__init__.py needs a docstring saying what flows in and out"
        assert not [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], \
            f"pipeline/{family.name}/__init__.py imports; keep it a docstring so importing one stage loads no other"


def test_architecture_document_names_every_module():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = [name for name in _modules() if name.startswith("pipeline.") and "." in name
               and name.rpartition(".")[2] + ".py" not in text and name.rpartition(".")[2] + "/" not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not mention {missing}"


# Benchmarks that measure the app itself (its timings, its re-run path) are the only code outside workbench/app
# that may import it: the research layer and the other benchmarks load no app code.
MEASURE_THE_APP = {"benchmarks.app_timings", "benchmarks.eval_speed"}


def test_nothing_outside_the_app_imports_it_but_the_benchmarks_that_measure_it():
    modules = _modules()
    for path in (ROOT / "benchmarks").glob("*.py"):
        modules[f"benchmarks.{path.stem}"] = path
    known = set(modules)
    offenders = {name: sorted(t for t in _imports(path, name, known) if t.startswith("workbench.app"))
                 for name, path in modules.items()
                 if not name.startswith("workbench.app") and name not in MEASURE_THE_APP}
    offenders = {name: targets for name, targets in offenders.items() if targets}
    assert not offenders, f"outside workbench/app, these import the app: {offenders}"
