"""The device report card (``botpsy bench``): speed, memory, latency, energy and the roofline per GGUF file.

``command``   ``botpsy bench``: BenchConfig, run_bench (measure and write the card), run_compare
``measure``   the per-model measurements: load, TTFT cold/warm, prefill/decode, agent turn and task
``roofline``  measured memory bandwidth, bytes read per decoded token, decode as a fraction of the limit
``machine``   CPU, caches, memory, OS, llama.cpp build; RAPL energy counters; peak RSS sampling
``card``      the versioned card schema (documented there), validation, markdown
``plots``     speed, TTFT and memory plots (PNG)
``compare``   several cards side by side
"""
