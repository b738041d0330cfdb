"""BFCL v4, scored offline with the official ``bfcl-eval`` checkers through botpsy's chat format.

* ``items``: the offline categories (``CATEGORIES``; ``LEFT_OUT`` says why the others are not),
  ``bfcl_items(categories, limit) -> list[Item]`` with chat turns and OpenAI-style tools.
* ``scoring``: ``score_item(item, outputs) -> Verdict`` on recorded raw model text and
  ``run_item(item, generate) -> Verdict`` that asks the model (multi-turn driven turn by turn
  on BFCL's own backends).
* ``aggregate``: ``summarize(verdicts)``, per-category and overall accuracies as BFCL weights them.
* ``gold``: the ground truth written as model output (an oracle that must score 100%).
* ``official``: the only module that imports ``bfcl_eval``.

Example::

    from botpsy.chat import render
    from botpsy.eval.bfcl import bfcl_items, run_item, summarize
    items = bfcl_items(["non_live"], limit=20)
    verdicts = [run_item(item, my_generate) for item in items]
    print(summarize(verdicts)["overall"])
"""

from botpsy.eval.bfcl.aggregate import summarize
from botpsy.eval.bfcl.items import CATEGORIES, LEFT_OUT, Item, bfcl_items
from botpsy.eval.bfcl.scoring import Verdict, run_item, score_item

__all__ = ["CATEGORIES", "LEFT_OUT", "Item", "bfcl_items", "score_item", "run_item", "Verdict", "summarize"]
