"""ACEBench's normal and special checks, written from its published rules.

**normal**: the model's calls are matched against one gold answer (``{name: {param: value}}``;
a gold file may list several acceptable answers, any one passes). A gold name may carry a
``_<n>`` suffix when the same function is called several times. The rules, in ACEBench's order:

1. as many calls as gold calls, and each function called exactly as often as in the gold;
2. each gold call pairs with a different model call of that function that passes:
   every required parameter given; no parameter that the function lacks or the gold answer
   leaves out (an optional parameter the user never mentioned must not be invented); each
   value of the declared type (or of the gold value's type) and matching the gold value:

   * text: the gold text, standardized (lower case; spaces and ``, . / - _ * ^`` removed;
     ``'`` as ``"``), is contained in the model's standardized text;
   * lists: same length and order, items matched one by one (texts standardized, equal);
   * objects: the same keys; nested values by these rules (a text leaf is matched as text by
     containment, as ACEBench does);
   * numbers and booleans: equal (``3 == 3.0``; ``"true"`` reads as ``True``). ACEBench's own
     checker compares only their types, never their values; botpsy compares values, so the
     atom_number and atom_bool figures are stricter than ACEBench's.

   A gold value of ``""`` accepts any value.

**special**: the model must not call a function, and its answer must carry ACEBench's phrase
and the specifics (phrases matched ignoring case, names and values exactly):

* incomplete: "Missing necessary parameters", the function's name and every missing parameter;
* error_param: "There is incorrect value" and every wrong value the user gave;
* irrelevant: "the limitations of the function".

>>> check_special("special_irrelevant", "", "Due to the limitations of the function, I cannot solve this problem.", [])
Check(valid=True, error_type='', error='')
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

Call = tuple[str, dict[str, Any]]

SPECIAL_PHRASES = {"special_incomplete": "missing necessary parameters",
                   "special_error_param": "there is incorrect value",
                   "special_irrelevant": "the limitations of the function"}
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "str": (str,), "integer": (int,), "int": (int,), "number": (int, float), "float": (int, float),
    "boolean": (bool,), "bool": (bool,), "array": (list,), "list": (list,), "tuple": (list,), "object": (dict,),
    "dict": (dict,)}


@dataclass
class Check:
    valid: bool
    error_type: str = ""
    error: str = ""


OK = Check(True)


def standardize(text: str) -> str:
    """ACEBench's text normal form.

    >>> standardize("New-York City, NY")
    'newyorkcityny'
    """
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def base_name(gold_name: str) -> str:
    """A gold call's function name without the ``_<n>`` that numbers repeated calls."""
    return re.sub(r"_\d+$", "", gold_name)


# ---- normal -------------------------------------------------------------------------------


def check_normal(functions: list[dict], calls: list[Call], gold: dict | list) -> Check:
    """The model's ``calls`` against a gold answer (or a list of acceptable ones)."""
    answers = gold if isinstance(gold, list) else [gold]
    first = Check(False, "no_gold", "the item has no gold answer")
    for answer in answers:
        check = check_answer(functions, calls, answer)
        if check.valid:
            return check
        first = check if first.error_type == "no_gold" else first
    return first


def check_answer(functions: list[dict], calls: list[Call], answer: dict) -> Check:
    expected = [(base_name(name), args) for name, args in answer.items()]
    if len(calls) != len(expected):
        return Check(False, "wrong_call_count", f"{len(calls)} calls, expected {len(expected)}")
    wanted, made = Counter(n for n, _ in expected), Counter(n for n, _ in calls)
    if wanted != made:
        return Check(False, "function_mismatch", f"called {dict(made)}, expected {dict(wanted)}")
    specs = {f.get("name"): f for f in functions}
    failures: list[Check] = []

    def assign(i: int, used: frozenset) -> bool:
        if i == len(expected):
            return True
        name, gold_args = expected[i]
        for j, (called, args) in enumerate(calls):
            if j in used or called != name:
                continue
            check = check_call(spec_for(specs, name), args, gold_args)
            if check.valid and assign(i + 1, used | {j}):
                return True
            failures.append(check)
        return False

    if assign(0, frozenset()):
        return OK
    return next((f for f in failures if not f.valid), Check(False, "wrong_values", "no pairing of calls passes"))


def spec_for(specs: dict[str, dict], name: str) -> dict:
    """The function's spec (ACEBench falls back to a spec whose name is part of the gold name)."""
    if name in specs:
        return specs[name]
    return next((spec for spec_name, spec in specs.items() if spec_name and spec_name in name), {"name": name})


def parameters_of(spec: dict) -> dict:
    """A spec's parameter schema: ACEBench writes it under ``parameters`` or ``arguments``."""
    params = spec.get("parameters") or spec.get("arguments") or {}
    return params if isinstance(params, dict) else {}


def check_call(spec: dict, args: dict, gold_args: dict) -> Check:
    """One call's arguments against its gold arguments (rule 2 of the module docstring)."""
    name = spec.get("name", "?")
    params = parameters_of(spec)
    properties = params.get("properties") or {}
    if not gold_args or not args:
        return OK if not gold_args and not args else Check(False, "wrong_params", f"{name}: {args} vs gold {gold_args}")
    for required in params.get("required") or []:
        if required in properties and required not in args:
            return Check(False, "missing_required", f"{name}: required parameter {required} missing")
    for param, value in args.items():
        if param not in properties or param not in gold_args:
            return Check(False, "unexpected_param", f"{name}: parameter {param} is not in the gold answer")
        gold = gold_args[param]
        declared = (properties[param] or {}).get("type", "")
        value = as_bool(value) if declared in ("boolean", "bool") else value
        if not type_fits(value, declared, gold):
            return Check(False, "type_error", f"{name}.{param}: {value!r} is not of type {declared}")
        if not value_matches(value, gold):
            return Check(False, "value_error", f"{name}.{param}: {value!r}, expected {gold!r}")
    return OK


def as_bool(value: Any) -> Any:
    return {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value


def type_fits(value: Any, declared: str, gold: Any) -> bool:
    """Of the declared type, or of the gold value's type (ACEBench accepts either)."""
    if gold == "":
        return True
    wanted = _PYTHON_TYPES.get(declared)
    if wanted is not None and isinstance(value, wanted) and not (isinstance(value, bool) and bool not in wanted):
        return True
    return type(value) is type(gold) or (is_number(value) and is_number(gold))


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def value_matches(value: Any, gold: Any, in_object: bool = False) -> bool:
    """``value`` against ``gold`` by the rules of the module docstring.

    >>> value_matches("Los Angeles, CA", "los angeles"), value_matches(["a", "b"], ["b", "a"])
    (True, False)
    >>> value_matches({"n": 21000, "k": "GDP"}, {"n": 21000.0, "k": "gdp"}), value_matches(2.5, 3)
    (True, False)
    """
    if isinstance(gold, str):
        if gold == "":
            return True
        if not isinstance(value, str) and not in_object:
            return False
        return standardize(gold) in standardize(value if isinstance(value, str) else str(value))
    if isinstance(gold, bool) or isinstance(value, bool):
        return as_bool(value) is gold if isinstance(gold, bool) else False
    if is_number(gold):
        number = to_number(value)
        return number is not None and abs(number - gold) <= 1e-9 * max(1.0, abs(gold))
    if isinstance(gold, list):
        if not isinstance(value, list) or len(value) != len(gold):
            return False
        return all(item_matches(v, g) for v, g in zip(value, gold))
    if isinstance(gold, dict):
        if not isinstance(value, dict) or set(value) != set(gold):
            return False
        return all(value_matches(value[k], g, in_object=True) for k, g in gold.items())
    return value == gold


def item_matches(value: Any, gold: Any) -> bool:
    """A list item: texts standardized and equal (ACEBench's list rule), others by ``value_matches``."""
    if isinstance(gold, str):
        return isinstance(value, str) and standardize(value) == standardize(gold)
    return value_matches(value, gold)


def to_number(value: Any) -> float | None:
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


# ---- special ------------------------------------------------------------------------------


def check_special(category: str, gold: Any, answer: str, calls: list[Call]) -> Check:
    """A special item: no call, and the answer names what is missing or wrong, or that no function fits."""
    if calls:
        return Check(False, "called_a_function", f"called {[name for name, _ in calls]} instead of answering")
    phrase = SPECIAL_PHRASES[category]
    if phrase not in answer.lower():
        return Check(False, "error_detection", f"the answer lacks {phrase!r}")
    if category == "special_incomplete":
        for name, missing in (gold or {}).items():
            if name not in answer:
                return Check(False, "error_correction", f"the answer does not name the function {name}")
            absent = [p for p in missing if p not in answer]
            if absent:
                return Check(False, "error_correction", f"the answer does not name the missing {absent} of {name}")
    elif category == "special_error_param":
        for name, values in (gold or {}).items():
            absent = [v for v in values if v not in answer]
            if absent:
                return Check(False, "error_correction",
                             f"the answer does not quote the wrong value(s) {absent} of {name}")
    return OK
