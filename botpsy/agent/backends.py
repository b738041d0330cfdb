"""Which backend a ``--model`` value means, for ``botpsy chat`` and ``botpsy solve``.

* ``path/to/model.gguf`` (a file): llama.cpp, after the runtime's file and memory check, so a
  missing, corrupt or too-large file is refused with a plain message;
* ``path/to/checkpoint/`` (a folder with ``config.json``): transformers;
* ``http://host:port/v1``: any OpenAI-compatible server (vLLM, llama-server, Ollama);
* ``scripted:replies.json``: the scripted fake, replaying a JSON list of generated turns
  (terminal tests and demos without a model);
* a known base model name (``qwen2.5-coder-0.5b``, see ``botpsy models``): its pulled GGUF.

Example::

    backend = open_backend("runs/speedrun/gguf/model-q4_k_m.gguf", BackendOptions(threads=2, n_ctx=8192))
"""

from __future__ import annotations

import json
from pathlib import Path

from botpsy.runtime.backend import Backend, BackendOptions, ModelLoadError

SCRIPTED_PREFIX = "scripted:"


def open_backend(model: str, options: BackendOptions) -> Backend:
    """The backend for ``model`` (see the module docstring); ``ModelLoadError`` when it cannot be used."""
    if model.startswith(SCRIPTED_PREFIX):
        return _scripted(Path(model[len(SCRIPTED_PREFIX):]))
    if model.startswith(("http://", "https://")):
        from botpsy.runtime.openai_backend import OpenAIBackend

        return OpenAIBackend(model)
    from botpsy.model.bases import BaseModelError, is_base_name, resolve_base
    from botpsy.model.releases import built_path, is_release_name

    if is_base_name(model) or is_release_name(model):
        try:
            model = str(resolve_base(model) if is_base_name(model) else built_path(model))
        except BaseModelError as exc:
            raise ModelLoadError(str(exc)) from None
    path = Path(model)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} is a folder without config.json: not a checkpoint (or give a .gguf file)")
        from botpsy.runtime.hf_backend import HFBackend

        return HFBackend(path, options)
    from botpsy.runtime.llama_backend import LlamaBackend

    return LlamaBackend(path, options)  # checks the file and the memory it needs before loading


def _scripted(path: Path) -> Backend:
    from botpsy.runtime.scripted import ScriptedBackend

    try:
        replies = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"cannot read scripted replies from {path}: {exc}") from None
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise ModelLoadError(f"{path} must hold a JSON list of strings (one generated turn each)")
    return ScriptedBackend(replies)
