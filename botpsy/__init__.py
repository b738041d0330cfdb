"""botpsy: an on-device personal assistant around a sub-billion-parameter agentic model.

The package follows the recipe end to end; each folder is one concern:
``chat`` (Qwen3.5 wire format), ``model`` (tokenizer, reference model, checkpoints),
``world`` (device database, tools, tasks, checker), ``train``, ``export``, ``runtime``,
``agent``, ``eval`` and ``bench``. ``botpsy <stage> --help`` lists each stage's flags.
"""

__version__ = "0.1.0"
