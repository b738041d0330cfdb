"""Rollouts from llama.cpp with the learner's current adapter, for the later stages on a CPU.

MOPD and RL sample completions from the student they train. In torch, on this project's 2-core
AVX2 machine, the 0.5B student in float32 samples about 1.7 completion tokens a second (a
MOPD step of 8 rollouts, 471 tokens, spent 187 of its 271 s sampling), while llama.cpp decodes
the same model, its adapter applied at run time on the Q4_K_M base, at about 25 tokens a second.

``LlamaRollouts`` keeps a llama.cpp copy of the policy: every ``refresh`` optimizer steps it saves
the learner's adapter (``save_checkpoint``, as a stage folder), writes it as a llama.cpp adapter
GGUF on the base the student was loaded from (``botpsy.export.lora_gguf``) and reopens the
backend on it; between refreshes it samples from the adapter of the last refresh. How far the
sampler may lag the learner:

* up to ``refresh - 1`` optimizer steps (``refresh=1``: none, every step samples from the weights
  that step starts with, as torch rollouts do);
* the adapter is stored in bfloat16 (as every stage folder) and runs on the quantized base file,
  while the learner computes with the dequantized base in float32; on the SFT student's adapter
  file the two agree on the next token at 96.6% of positions (`botpsy parity`; the base file alone
  97.9%). MOPD's divergences and RL's log-probabilities are computed by the learner on the sampled
  tokens either way, so this changes which completions are drawn, not how they are scored.

Only a LoRA student on a GGUF base can sample here (the real student); the tiny reference model
trains every weight and samples in torch.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from botpsy.train.rollout import Sample


class LlamaRollouts:
    """The policy's llama.cpp copy, refreshed from the learner every ``refresh`` steps."""

    def __init__(self, folder: str | Path, base: str, refresh: int = 1, threads: int = 0, n_ctx: int = 8192):
        if refresh < 1:
            raise ValueError(f"the rollout refresh interval must be at least 1 step, got {refresh}")
        if not base:
            raise ValueError("llama.cpp rollouts need the student's GGUF base; the student is not a LoRA adapter on one "
                             "(use the torch rollouts for a fully trained model)")
        self.folder, self.base, self.refresh = Path(folder), base, refresh
        self.threads, self.n_ctx = threads, n_ctx
        self.backend, self.loaded_step, self.refreshes, self.refresh_s = None, None, 0, 0.0

    def expire(self) -> None:
        """Make the next ``sync`` refresh whatever its step (before an evaluation of the current weights)."""
        self.loaded_step = None

    def due(self, step: int) -> bool:
        return self.loaded_step is None or step - self.loaded_step >= self.refresh

    def sync(self, model, tokenizer, step: int) -> bool:
        """Write the learner's adapter and reopen llama.cpp on it when a refresh is due; True if it did."""
        if not self.due(step):
            return False
        from botpsy.export.lora_gguf import write_lora_gguf
        from botpsy.model.checkpoint import save_checkpoint
        from botpsy.runtime.backend import BackendOptions
        from botpsy.runtime.llama_backend import LlamaBackend

        started = time.perf_counter()
        self.close()
        adapter = self.folder / "adapter"
        shutil.rmtree(adapter, ignore_errors=True)
        save_checkpoint(model, tokenizer, adapter, stage="rollout-policy", meta={"base": self.base, "adapter": "lora",
                                                                                  "step": step})
        write_lora_gguf(adapter, self.folder / "policy-lora.gguf", base=self.base, name="rollout-policy")
        self.backend = LlamaBackend(self.folder / "policy-lora.gguf",
                                    BackendOptions(threads=self.threads, n_ctx=self.n_ctx, prefix_cache_mb=0))
        self.loaded_step, self.refreshes = step, self.refreshes + 1
        self.refresh_s += time.perf_counter() - started
        return True

    def sample(self, tokenizer, prompts: list[str], *, max_new_tokens: int, temperature: float = 1.0,
               top_p: float = 1.0, seed: int = 0) -> list[Sample]:
        """One completion per prompt (``temperature=0``: greedy), prompt ``i`` seeded with ``(seed, i)``
        as in ``rollout.sample_batch``; a finished completion ends with its stop token."""
        from botpsy.runtime.backend import SamplingConfig

        if self.backend is None:
            raise RuntimeError("no policy loaded yet: call sync(model, tokenizer, step) first")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        samples = []
        for i, prompt in enumerate(prompts):
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            if not ids:
                raise ValueError("an empty prompt cannot be continued")
            sampling = SamplingConfig(temperature=temperature, top_p=top_p, top_k=0, seed=seed * 1_000_003 + i)
            stream = self.backend.stream(ids, sampling, max_new_tokens)
            with stream:
                completion = [out.id for out in stream]
            text = tokenizer.decode(completion, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            samples.append(Sample(prompt_ids=list(ids), completion_ids=completion, text=text,
                                  finished=stream.info.finish_reason == "stop"))
        return samples

    def describe(self) -> dict:
        """This process's refreshes (a resumed run counts its own; the curves' ``rollout_policy_step`` has every step's)."""
        return {"backend": "llama.cpp", "base": self.base, "refresh_every_steps": self.refresh,
                "refreshes": self.refreshes, "refresh_s": round(self.refresh_s, 1), "policy_step": self.loaded_step}

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
