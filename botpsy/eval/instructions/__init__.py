"""botpsy's own IFEval and IFBench instruction checkers, strict/loose scoring and the check
against the official verdicts.

* ``registry``: instruction id -> checker (``INSTRUCTIONS``, ``run_check``), skipped ids with reasons;
* ``ifeval_checks``, ``ifbench_checks``, ``ifbench_format``: the checkers;
* ``sentences``, ``words``, ``language``: the text tools they share;
* ``scoring``: ``score_item(record, response)`` and ``aggregate(scores)``;
* ``agreement``: ``python -m botpsy.eval.instructions.agreement --json`` compares with the
  official verdicts on the reference responses and writes ``bench_out/if_agreement.json``.
"""

from botpsy.eval.instructions.registry import INSTRUCTIONS, Instruction, is_skipped, run_check
from botpsy.eval.instructions.scoring import aggregate, loose_variants, score_item

__all__ = ["INSTRUCTIONS", "Instruction", "aggregate", "is_skipped", "loose_variants", "run_check",
           "score_item"]
