"""The one doorway to the official ``bfcl-eval`` package: its data, its checkers, its backends.

Why a stand-in module: ``ast_checker`` imports ``bfcl_eval.constants.model_config``, which imports
every provider SDK (anthropic, openai, google-genai, mistral, cohere, boto3, qwen-agent, ...)
because it builds BFCL's whole model registry. botpsy installs ``bfcl-eval`` with ``--no-deps``
(its declared dependencies pull a CUDA torch and pin numpy 1.x), so those SDKs are absent. The
checker reads exactly one thing from the registry: ``MODEL_CONFIG_MAPPING[model].underscore_to_dot``
(whether a model's API renamed ``a.b`` to ``a_b``). botpsy keeps dotted names as they are, so the
stand-in registry holds one model, ``botpsy``, with ``underscore_to_dot=False``. It is put into
``sys.modules`` only if the real module is not already imported.

Multi-turn backends: BFCL's ``execute_multi_turn_func_call`` keeps each backend instance in its
module's globals under ``{model}_{entry id}_{class}_instance`` and reuses it on the next call, which
is how state carries from turn to turn. ``BackendSession`` gives every run its own model name and
deletes those globals afterwards, so scoring the same item twice starts from the same state.

Example::

    python -c "from botpsy.eval.bfcl.official import ast_checker; print(ast_checker)"
"""

from __future__ import annotations

import builtins
import importlib.resources
import inspect
import itertools
import sys
import types
from pathlib import Path

MODEL_NAME = "botpsy"  # the stand-in registry's only entry; it must not contain "_" (BFCL reads "_" as "/")


def _install_model_registry_stand_in() -> None:
    name = "bfcl_eval.constants.model_config"
    if name in sys.modules:
        return
    stand_in = types.ModuleType(name)
    stand_in.__doc__ = "botpsy's stand-in for BFCL's model registry (see botpsy/eval/bfcl/official.py)."
    stand_in.MODEL_CONFIG_MAPPING = {MODEL_NAME: types.SimpleNamespace(underscore_to_dot=False)}
    sys.modules[name] = stand_in


_install_model_registry_stand_in()

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402

__all__ = ["Language", "ast_checker", "multi_turn_checker", "data_dir", "BackendSession", "backend_methods"]

_session_ids = itertools.count()


def data_dir() -> Path:
    """``bfcl_eval/data`` inside the installed package (questions; answers under ``possible_answer``)."""
    return Path(str(importlib.resources.files("bfcl_eval") / "data"))


def backend_class(class_name: str) -> type:
    module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
    return getattr(module, class_name)


def backend_methods(class_names: list[str]) -> dict[str, inspect.Signature]:
    """Public method name -> signature for the involved backend classes (what a call may name)."""
    methods: dict[str, inspect.Signature] = {}
    for class_name in class_names:
        for name, method in inspect.getmembers(backend_class(class_name), predicate=inspect.isfunction):
            if not name.startswith("_"):
                methods[name] = inspect.signature(method)
    return methods


# Names that BFCL's ``eval`` could reach besides the backend methods: builtins (``open``,
# ``__import__``...) and the executor module's own globals. A call naming one of them is never
# evaluated; it is replaced by a call to an undefined name, which fails like any unknown function.
_UNSAFE_NAMES = frozenset(vars(builtins)) | frozenset(vars(multi_turn_utils))


def safe_call_string(name: str, arguments: dict, methods: dict) -> str:
    """``name(k=repr(v), ...)`` for BFCL's executor; anything that could run other code is defused."""
    keys_ok = all(isinstance(k, str) and k.isidentifier() for k in arguments)
    name_ok = name in methods or (name.isidentifier() and name not in _UNSAFE_NAMES and not name.startswith("_"))
    if not (keys_ok and name_ok):
        return "botpsy_rejected_call()"  # not defined anywhere: executes as "name ... is not defined"
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


class BackendSession:
    """One isolated set of BFCL backend instances: use as a context manager.

    ``model_name`` is unique per session; ``execute`` runs calls at inference time and
    ``multi_turn_checker`` (called with the same name) builds its own ``_eval`` instances.
    """

    def __init__(self) -> None:
        self.model_name = f"{MODEL_NAME}{next(_session_ids)}"

    def __enter__(self) -> "BackendSession":
        return self

    def __exit__(self, *exc) -> None:
        prefix = self.model_name + "_"
        namespace = vars(multi_turn_utils)
        for key in [k for k in namespace if k.startswith(prefix)]:
            del namespace[key]

    def execute(self, entry: dict, call_strings: list[str]) -> list[str]:
        """Run one step's calls on the entry's backends (state carries over within the session)."""
        results, _ = multi_turn_utils.execute_multi_turn_func_call(
            func_call_list=call_strings,
            initial_config=entry["initial_config"],
            involved_classes=entry["involved_classes"],
            model_name=self.model_name,
            test_entry_id=entry["id"],
            long_context="long_context" in entry["id"],
            is_evaL_run=False,
        )
        return results

    def check(self, decoded: list[list[list[str]]], ground_truth: list[list[str]], entry: dict) -> dict:
        """BFCL's multi-turn checker on decoded calls (turns -> steps -> call strings)."""
        category = entry["id"].rsplit("_", 1)[0]
        return multi_turn_checker(decoded, ground_truth, entry, category, self.model_name)
