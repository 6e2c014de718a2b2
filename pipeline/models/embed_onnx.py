"""The bi-encoder in int8: ONNX export plus ONNX Runtime dynamic quantisation, cached on disk.

``embedding.precision="int8"`` routes here (:meth:`pipeline.models.registry.Models.embedder`). It is the reranker's
path (:mod:`pipeline.models.rerank_onnx`: same cache folder and checkpoint key, same quantiser) applied to the
sentence-transformers checkpoint that ``embedding.model`` names, resolved like every model
(:func:`pipeline.models.resolve.resolve_model`):

1. **Export** the transformer body (``AutoModel``) to ONNX with ``torch.onnx.export`` (TorchScript exporter, opset
   17, dynamic batch and sequence axes). The graph's output is the *token* embeddings (``last_hidden_state``), not
   the pooled vector, so the late-chunking path (``ingest.passage_vectors_mode=late``) can pool its sentence windows
   from the same forward pass, as :meth:`pipeline.models.encoders.SentenceEmbedder.encode_late` does.
2. **Quantise** the weight MatMuls to signed int8 with per-channel scales (``quantize_dynamic``, ``per_channel``):
   activations are quantised per batch at run time, so no calibration data is needed. One scale per output column
   instead of one per matrix keeps the vectors much closer to fp32 for MiniLM (whose weight columns differ in range)
   at the same speed; the agreement with fp32 is measured in ``benchmarks/embed_onnx.py``.
3. **Cache** the int8 file under ``$WORKBENCH_ONNX_CACHE`` in the checkpoint's folder (keyed by its resolved path and
   its weight files' sizes and modification times), beside the reranker's file, named by :data:`RECIPE`: the export
   runs once per checkpoint and recipe, never inside the repository.

:class:`OnnxEmbedder` keeps the :class:`pipeline.models.encoders.Embedder` protocol and the sentence-transformers
pipeline of the checkpoint (its ``modules.json``): the checkpoint's own tokenizer, truncation at its
``max_seq_length`` (``sentence_bert_config.json``), mean pooling over the attention mask (``1_Pooling``) and L2
normalisation. A checkpoint with any other pooling or module (a Dense projection, CLS pooling) is refused with a
message to use fp32, never embedded differently. Texts are sorted by length before batching (as
sentence-transformers does) so a batch pads little; because activations are scaled per batch, a text's int8 vector
depends slightly on its batch-mates, and sorting at least makes that independent of the input order.

Its ``name`` is the checkpoint's name with ``@int8``: the validator's stored sentence-window vectors carry the name
of the embedder that made them, so windows embedded in fp32 are never compared with int8 claim vectors (or the
reverse); the store's build signature carries ``embedding.precision`` for the chunk vectors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

from pipeline.models.encoders import late_pool
from pipeline.models.rerank_onnx import OPSET, _checkpoint_key, cache_root
from pipeline.models.resolve import ModelUnavailable, quiet_transformers, resolve_model

RECIPE = "embed.int8-perchannel-v1"      # the cached file's name; a new recipe re-exports
NAME_SUFFIX = "@int8"
_FALLBACK = "set embedding.precision=fp32 to embed with PyTorch"


# -- the checkpoint's sentence-transformers pipeline ---------------------------------------------------------

def _read_json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def pipeline_settings(model_dir: Path, name: str) -> tuple[int, bool]:
    """(max_seq_length, lower-case the text) of a mean-pooled checkpoint; ModelUnavailable when its
    sentence-transformers modules are anything but Transformer → mean Pooling → (Normalize)."""
    modules = _read_json(model_dir / "modules.json") or []
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in ("Transformer", "Pooling", "Normalize"):
            raise ModelUnavailable(f"int8 embedding implements Transformer, mean Pooling and Normalize only; {name} "
                                   f"also has a {kind} module: {_FALLBACK}")
        if kind == "Pooling":
            pooling = _read_json(model_dir / str(module.get("path", "")) / "config.json") or {}
            modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True)
            if modes != ["pooling_mode_mean_tokens"]:
                raise ModelUnavailable(f"int8 embedding implements mean pooling only; {name} pools by "
                                       f"{', '.join(modes) or 'nothing'}: {_FALLBACK}")
    settings = _read_json(model_dir / "sentence_bert_config.json") or {}
    max_len = settings.get("max_seq_length")
    if not max_len:
        tokenizer_cfg = _read_json(model_dir / "tokenizer_config.json") or {}
        max_len = min(int(tokenizer_cfg.get("model_max_length") or 512), 512)
    return int(max_len), bool(settings.get("do_lower_case", False))


# -- export, quantise, cache ---------------------------------------------------------------------------------

def export_token_embeddings(model_dir: Path, out: Path) -> list[str]:
    """Export the checkpoint's transformer body to ONNX at ``out`` (output ``token_embeddings``); returns the
    graph's input names."""
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer

    quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    sample = tokenizer(["how often are deliveries retried", "eight times"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = model

        def forward(self, *inputs):
            return self.body(**dict(zip(names, inputs, strict=True))).last_hidden_state

    axes = {n: {0: "batch", 1: "sequence"} for n in names + ["token_embeddings"]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python control flow: noise on a CLI's stderr
        torch.onnx.export(TokenEmbeddings(), tuple(sample[n] for n in names), str(out), input_names=names,
                          output_names=["token_embeddings"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    return names


def quantize_embedder(src: Path, dst: Path) -> None:
    """Dynamic quantisation of the weight MatMuls: signed int8, one scale per output channel."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # the quantiser needs the onnx package besides onnxruntime
        raise ModelUnavailable(f"int8 embedding needs onnxruntime and onnx (pip install onnxruntime onnx; {exc}); "
                               f"{_FALLBACK}") from None
    with _quiet_root_logger():
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])


@contextlib.contextmanager
def _quiet_root_logger():
    """The quantiser logs advice through the root logger, which would also configure logging for the whole
    process (``logging.warning`` calls ``basicConfig`` when the root has no handler): a NullHandler meanwhile."""
    root = logging.getLogger()
    quiet = logging.NullHandler()
    level = root.level
    root.addHandler(quiet)
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.removeHandler(quiet)
        root.setLevel(level)


def int8_embedder_path(name: str) -> tuple[Path, Path]:
    """(checkpoint directory, cached int8 ONNX file), exporting and quantising on first use. Any failure is one
    :class:`ModelUnavailable` line that names the cause and the fp32 fallback."""
    resolved = resolve_model(name)
    pipeline_settings(resolved.path, name)  # refuse a checkpoint this path would embed differently, before exporting
    folder = cache_root() / _checkpoint_key(resolved.path)
    int8 = folder / f"{RECIPE}.onnx"
    if int8.exists():
        return resolved.path, int8
    fp32 = folder / f"embed.fp32.{os.getpid()}.{threading.get_ident()}.onnx"
    tmp = folder / f"{RECIPE}.{os.getpid()}.{threading.get_ident()}.onnx"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        export_token_embeddings(resolved.path, fp32)
        quantize_embedder(fp32, tmp)
        os.replace(tmp, int8)  # atomic: a concurrent loader sees the whole file or none
    except ModelUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 — an export failure is a model that cannot load, in one line
        raise ModelUnavailable(f"could not export {name} to int8 ONNX ({type(exc).__name__}: {exc}); "
                               f"{_FALLBACK}") from None
    finally:
        fp32.unlink(missing_ok=True)
        for extra in folder.glob(f"{fp32.name}*"):  # external-data files a large export may leave
            extra.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return resolved.path, int8


# -- the embedder --------------------------------------------------------------------------------------------

class OnnxEmbedder:
    """The :class:`~pipeline.models.encoders.Embedder` protocol from a quantised graph: L2-normalised float32
    vectors, one ``encode`` call = one batched pass (counted in ``calls``)."""

    def __init__(self, name: str, model_dir: Path, onnx_path: Path, batch_size: int = 16,
                 threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ModelUnavailable(f"int8 embedding needs onnxruntime (pip install onnxruntime; {exc}); "
                                   f"{_FALLBACK}") from None
        from transformers import AutoTokenizer

        from pipeline.models.rerank_onnx import _torch_threads

        self.name = name + NAME_SUFFIX
        self.checkpoint = name
        self.source = f"onnx-int8:{onnx_path}"
        self.batch_size = batch_size
        self.max_tokens, self._lower = pipeline_settings(model_dir, name)
        self._tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _torch_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # no busy-waiting between calls: on shared cores a spinning pool takes CPU from the next stage (and from a
        # PyTorch model in the same process), which costs more than the microseconds it saves
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self.dim = int(self._session.get_outputs()[0].shape[-1])
        self.calls = 0
        self._lock = threading.Lock()

    def _features(self, texts: list[str], offsets: bool = False) -> dict:
        texts = [t.lower() for t in texts] if self._lower else list(texts)
        return self._tokenizer(texts, padding=True, truncation=True, max_length=self.max_tokens,
                               return_offsets_mapping=offsets, return_tensors="np")

    def _tokens(self, features: dict) -> tuple[np.ndarray, np.ndarray]:
        """(token embeddings (batch, seq, dim), attention mask (batch, seq))."""
        feeds = {n: np.asarray(features[n], dtype=np.int64) for n in self._inputs}
        tokens = self._session.run(["token_embeddings"], feeds)[0]
        return np.asarray(tokens, dtype=np.float32), feeds["attention_mask"]

    @staticmethod
    def _mean_pool(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
        weights = mask[..., None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _order(self, texts: list[str]) -> list[int]:
        return sorted(range(len(texts)), key=lambda i: -len(texts[i]))

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        with self._lock:
            self.calls += 1
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            size = batch_size or self.batch_size
            order = self._order(texts)
            for start in range(0, len(order), size):
                batch = order[start:start + size]
                out[batch] = self._mean_pool(*self._tokens(self._features([texts[i] for i in batch])))
        return out

    def encode_late(self, texts: list[str], spans: list[list[tuple[int, int]]],
                    batch_size: int | None = None) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Late chunking from the int8 forward pass: each text's vector and one vector per character span (its
        tokens mean-pooled, L2-normalised), with continuation passes for spans past the truncation, as
        :meth:`pipeline.models.encoders.SentenceEmbedder.encode_late` (:func:`~pipeline.models.encoders.late_pool`)."""
        def forward(batch: list[str]):
            features = self._features(batch, offsets=True)
            offsets = np.asarray(features.pop("offset_mapping"))
            tokens, mask = self._tokens(features)
            return self._mean_pool(tokens, mask), tokens, offsets, mask.astype(bool)

        with self._lock:
            self.calls += 1
            return late_pool(texts, spans, forward, batch_size or self.batch_size, self.dim)


def load_int8_embedder(name: str, batch_size: int = 16) -> OnnxEmbedder:
    """The int8 ONNX embedder for checkpoint ``name`` (exported and quantised once, then cached)."""
    model_dir, onnx_path = int8_embedder_path(name)
    return OnnxEmbedder(name, model_dir, onnx_path, batch_size=batch_size)
