"""The on-device runtime: model backends, the loop guard, the thinking budget and the prefix cache.

``loopguard`` watches generated tokens for reasoning loops; ``loopset`` generates the labelled
texts its benchmark runs on; ``loops_command`` is ``botpsy loops FILE.jsonl``.
"""
