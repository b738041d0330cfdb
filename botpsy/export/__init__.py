"""GGUF export: botpsy's own writer, llama.cpp quantization, file checks and the parity check.

* ``gguf_writer``: checkpoint -> float32 GGUF (``qwen35`` / ``qwen3``), tokenizer and chat template embedded.
* ``quantize``: float GGUF -> bf16 / Q8_0 / Q4_K_M through llama.cpp, types read back and checked.
* ``gguf_file``: header check naming what is wrong with a damaged file; tensor types per file.
* ``command``: ``botpsy export``; ``parity``: ``botpsy parity``.
"""
