"""The cross-encoder in int8: ONNX export plus ONNX Runtime dynamic quantisation, cached on disk.

``rerank.precision="int8"`` routes here (:meth:`pipeline.models.registry.Models.reranker`). The checkpoint is the one
``rerank.model`` names, resolved like every model (:func:`pipeline.models.resolve.resolve_model`), so int8 is the
same model as fp32, only cheaper to run:

1. **Export** the sequence-classification model to ONNX with ``torch.onnx.export`` (TorchScript exporter,
   opset 17, dynamic batch and sequence axes; inputs ``input_ids``, ``attention_mask`` and, for BERT-style
   models, ``token_type_ids``).
2. **Quantise** with ONNX Runtime's dynamic quantisation (``quantize_dynamic``, signed int8 weights;
   activations are quantised per batch at run time, so no calibration data is needed). The weights of the
   MatMul/Gemm nodes — nearly all of a BERT's compute — become int8 (a MiniLM-L6 goes from ~90 MB to
   ~23 MB), and the products run in int8 arithmetic (VNNI/AVX2 kernels on x86).
3. **Cache** both files under ``$WORKBENCH_ONNX_CACHE`` (default ``~/.cache/rag-workbench/onnx``), in a
   folder keyed by the checkpoint's resolved path and its weight files' sizes and modification times: the
   export runs once per checkpoint, never inside the repository, and a changed checkpoint is re-exported.

:class:`OnnxReranker` keeps :class:`pipeline.models.encoders.CrossEncoderReranker`'s protocol — ``score(query,
passages) -> logits`` (first logit per pair; the rerank stage applies the sigmoid) — with the same
tokenizer, the same ``max_tokens`` truncation (longest-first, as sentence-transformers does) and batches of
``batch_size`` pairs. Within a call, pairs are sorted by length before batching so short passages are not
padded to the longest one; logits are returned in the input order. Dynamic quantisation scales the
activations per batch, so a pair's int8 logit depends (in the third decimal, for the untrained head of
the tests) on its batch-mates; sorting at least makes the batches independent of the input order.

What int8 costs in agreement is measured, not assumed: ``tests/pipeline/test_rerank_onnx.py`` checks the
order on the demo corpus against fp32 for the same checkpoint, and ``benchmarks/rerank_tradeoff.py`` reports
latency for both (BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import numpy as np

from pipeline.models.resolve import ONNX_FILE, ModelUnavailable, resolve_model

OPSET = 17
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".json")


def cache_root() -> Path:
    return Path(os.environ.get("WORKBENCH_ONNX_CACHE") or Path.home() / ".cache" / "rag-workbench" / "onnx")


def _checkpoint_key(path: Path) -> str:
    """A folder name that changes whenever the checkpoint's weights or configuration change."""
    parts = [str(path.resolve())]
    for f in sorted(path.iterdir()):
        if f.is_file() and f.suffix in _WEIGHT_SUFFIXES:
            st = f.stat()
            parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def export_onnx(model_dir: Path, out: Path) -> list[str]:
    """Export the checkpoint's classifier to ONNX at ``out``; returns the graph's input names."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    sample = tokenizer(["what is the retry limit"], ["deliveries are retried eight times"], return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(model, tuple(sample[n] for n in names), str(out), input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    return names


def quantize_int8(src: Path, dst: Path) -> None:
    """ONNX Runtime dynamic quantisation: int8 weights, activations quantised per batch at run time."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # onnxruntime's quantiser needs the onnx package
        raise ModelUnavailable(f"int8 reranking needs the onnx package for quantisation: pip install onnx "
                               f"({exc})") from None
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)


def int8_model_path(name: str) -> tuple[Path, Path]:
    """(checkpoint directory, int8 ONNX file): a model shipped as int8 ONNX (the project's reader) is used as it
    is; any other checkpoint is exported and quantised on first use, then cached."""
    resolved = resolve_model(name)
    shipped = resolved.path / ONNX_FILE
    if shipped.is_file():
        return resolved.path, shipped
    folder = cache_root() / _checkpoint_key(resolved.path)
    int8 = folder / "model.int8.onnx"
    if not int8.exists():
        folder.mkdir(parents=True, exist_ok=True)
        fp32 = folder / f"model.fp32.{os.getpid()}.onnx"
        export_onnx(resolved.path, fp32)
        tmp = folder / f"model.int8.{os.getpid()}.onnx"
        quantize_int8(fp32, tmp)
        os.replace(tmp, int8)  # atomic: a concurrent loader sees the whole file or none
        fp32.unlink(missing_ok=True)
    return resolved.path, int8


class OnnxReranker:
    """A cross-encoder run by ONNX Runtime from a quantised graph; ``score`` returns raw logits."""

    def __init__(self, name: str, model_dir: Path, onnx_path: Path, max_tokens: int = 256,
                 batch_size: int = 16, threads: int | None = None) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.name = name
        self.source = f"onnx-int8:{onnx_path}"
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _torch_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._lock = threading.Lock()

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """The first logit per (query, passage) pair: the reranker's relevance, the reader's answer logit."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        return self.logits([query] * len(passages), list(passages))[:, 0]

    def logits(self, firsts: list[str], seconds: list[str]) -> np.ndarray:
        """Every logit of every (first, second) pair, shape (pairs, labels), in the input order; an NLI model reads
        (premise, hypothesis)."""
        enc = self._tokenizer(list(firsts), list(seconds), truncation="longest_first", max_length=self.max_tokens)
        lengths = [len(ids) for ids in enc["input_ids"]]
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        out: np.ndarray | None = None
        with self._lock:
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                width = max(lengths[i] for i in idx)
                feeds = {}
                for name in self._inputs:
                    fill = (self._tokenizer.pad_token_id or 0) if name == "input_ids" else 0
                    rows = np.full((len(idx), width), fill, dtype=np.int64)
                    for r, i in enumerate(idx):
                        values = enc[name][i]
                        rows[r, :len(values)] = values
                    feeds[name] = rows
                batch = np.asarray(self._session.run(["logits"], feeds)[0], dtype=np.float32).reshape(len(idx), -1)
                if out is None:
                    out = np.empty((len(lengths), batch.shape[1]), dtype=np.float32)
                out[idx] = batch
        return out if out is not None else np.zeros((0, 1), dtype=np.float32)


def _torch_threads() -> int:
    try:
        import torch

        return int(torch.get_num_threads())
    except ImportError:  # pragma: no cover
        return os.cpu_count() or 1


def load_int8_reranker(name: str, max_tokens: int = 256, batch_size: int = 16) -> OnnxReranker:
    """The int8 ONNX reranker for checkpoint ``name`` (exported and quantised once, then cached)."""
    model_dir, onnx_path = int8_model_path(name)
    return OnnxReranker(name, model_dir, onnx_path, max_tokens=max_tokens, batch_size=batch_size)
