"""The on-device runtime: model backends, generation with the loop guard and thinking budget, the prefix cache.

``backend``        the small interface every backend implements (render -> stream tokens -> stop)
``llama_backend``  llama.cpp through llama-cpp-python, the only module that imports ``llama_cpp``
``hf_backend``     transformers checkpoints; ``openai_backend`` any OpenAI-compatible server
``scripted``       a fake backend replaying scripted outputs, for tests
``generate``       generate() / generate_stream(): reasoning vs answer, loop policies, thinking budget
``prefix_cache``   saved llama.cpp states at the system + tools prefix boundary
``memory``         how much memory a GGUF needs, and refusing what cannot fit
``loopguard``      the loop detector; ``loopset`` its labelled benchmark texts;
``loops_command``  ``botpsy loops FILE.jsonl``
"""
