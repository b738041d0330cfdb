"""Worked answers to catalogue requests a model can answer itself, for ``fn_answer`` examples.

BFCL's irrelevance items and the device world's "irrelevant" tasks offer tools that do not fit a
request the model could answer on its own ("the area of a triangle with base 10 and height 5",
with only a BMI function offered). The fn2 student, with thinking off, called the offered function
on 40 of 50 such BFCL items, usually because its parameters had the request's shape (two numbers:
``weight=10, height=5``). ``botpsy.train.functions`` writes examples of exactly that case whose
reply is the answer itself, worked out here in Python so that every number in the training text is
right. Only requests whose answer can be computed (or looked up in a small table) are covered.

>>> answer("calculate_triangle_area", {"base": 10, "height": 5})
'The area is 25 square units (half of 10 × 5).'
>>> answer("is_prime", {"number": 91})
'No, 91 is not prime: it is 7 × 13.'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date
from typing import Any

CAPITALS = {
    "Japan": "Tokyo", "Kenya": "Nairobi", "Canada": "Ottawa", "India": "New Delhi", "Brazil": "Brasília",
    "Egypt": "Cairo", "Australia": "Canberra", "Germany": "Berlin", "Spain": "Madrid", "Peru": "Lima",
    "Vietnam": "Hanoi", "Ireland": "Dublin", "Austria": "Vienna", "Norway": "Oslo", "Portugal": "Lisbon",
    "Mexico": "Mexico City", "Chile": "Santiago", "Ghana": "Accra",
}
METRES = {"km": 1000.0, "miles": 1609.344, "feet": 0.3048, "metres": 1.0}


def number(value: float, digits: int = 2) -> str:
    """A number as a person writes it: no trailing zeros, thousands separated.

    >>> number(25.0), number(1234.5678), number(-0.5)
    ('25', '1,234.57', '-0.5')
    """
    rounded = round(float(value), digits)
    if rounded == int(rounded):
        return f"{int(rounded):,}"
    return f"{rounded:,.{digits}f}".rstrip("0").rstrip(".")


def listed(values: list) -> str:
    words = [number(v) if isinstance(v, (int, float)) else str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def triangle(a: dict) -> str:
    unit = a.get("unit")
    square = f"square {unit}" if unit else "square units"
    return f"The area is {number(a['base'] * a['height'] / 2)} {square} (half of {number(a['base'])} × {number(a['height'])})."


def circumference(a: dict) -> str:
    return f"The circumference is 2π × {number(a['radius'])} ≈ {number(2 * math.pi * a['radius'])}."


def quadratic(a: dict) -> str:
    p, q, r = a["a"], a["b"], a["c"]
    disc = q * q - 4 * p * r
    if disc > 0:
        x1, x2 = (-q + math.sqrt(disc)) / (2 * p), (-q - math.sqrt(disc)) / (2 * p)
        return f"The discriminant is {disc}, so there are two real roots: x ≈ {number(x1, 3)} and x ≈ {number(x2, 3)}."
    if disc == 0:
        return f"The discriminant is 0, so there is one repeated root: x = {number(-q / (2 * p), 3)}."
    real, imag = -q / (2 * p), math.sqrt(-disc) / (2 * p)
    return f"The discriminant is {disc}, so there are no real roots; the complex roots are {number(real, 3)} ± {number(imag, 3)}i."


def prime(a: dict) -> str:
    n = a["number"]
    factor = next((d for d in range(2, math.isqrt(n) + 1) if n % d == 0), None)
    if n < 2:
        return f"No, {n} is not prime."
    if factor is None:
        return f"Yes, {n} is prime."
    return f"No, {n} is not prime: it is {factor} × {n // factor}."


def mean(values: list, what: str = "mean") -> str:
    return f"The {what} is {number(sum(values) / len(values))} ({number(sum(values))} ÷ {len(values)})."


def compound(a: dict) -> str:
    times = a.get("times_per_year", 1)
    final = a["principal"] * (1 + a["rate"] / times) ** (times * a["years"])
    return f"It grows to about {number(final)} after {a['years']} years (interest {number(final - a['principal'])})."


def loan(a: dict) -> str:
    monthly, months = a["annual_rate"] / 100 / 12, a["term_years"] * 12
    payment = a["loan_amount"] * monthly / (1 - (1 + monthly) ** -months)
    return f"The monthly payment is about {number(payment)}, over {months} payments."


def split(a: dict) -> str:
    tip = a.get("tip_percent", 0)
    total = a["total"] * (1 + tip / 100)
    with_tip = f" with a {number(tip)}% tip" if tip else ""
    return f"Each of the {a['people']} people pays about {number(total / a['people'])} (total {number(total)}{with_tip})."


def days(a: dict) -> str:
    gap = abs((date.fromisoformat(a["end_date"]) - date.fromisoformat(a["start_date"])).days)
    return f"There are {gap} days between {a['start_date']} and {a['end_date']}."


def length(a: dict) -> str:
    value = a["value"] * METRES[a["from_unit"]] / METRES[a["to_unit"]]
    return f"{number(a['value'])} {a['from_unit']} is about {number(value)} {a['to_unit']}."


def sort(a: dict) -> str:
    order = "descending" if a.get("descending") else "ascending"
    return f"In {order} order: {listed(sorted(a['numbers'], reverse=bool(a.get('descending'))))}."


ANSWERS: dict[str, Callable[[dict], str]] = {
    "calculate_triangle_area": triangle,
    "circle_circumference": circumference,
    "solve_quadratic": quadratic,
    "factorial": lambda a: f"{a['n']}! = {math.factorial(a['n']):,}.",
    "greatest_common_divisor": lambda a: f"The greatest common divisor of {a['num1']} and {a['num2']} is {math.gcd(a['num1'], a['num2'])}.",
    "mean_of_numbers": lambda a: mean(a["numbers"]),
    "grade_average": lambda a: mean(a["grades"], "average grade"),
    "is_prime": prime,
    "compound_interest": compound,
    "loan_monthly_payment": loan,
    "split_bill": split,
    "days_between_dates": days,
    "calculate_bmi": lambda a: f"The BMI is {number(a['weight_kg'] / a['height_m'] ** 2, 1)} ({number(a['weight_kg'])} ÷ {number(a['height_m'])}²).",
    "kinetic_energy": lambda a: f"The kinetic energy is ½ × {number(a['mass'])} × {number(a['velocity'])}² = {number(a['mass'] * a['velocity'] ** 2 / 2)} J.",
    "capital_city": lambda a: f"The capital of {a['country']} is {CAPITALS[a['country']]}.",
    "word_count": lambda a: f"That text has {len(a['text'].split())} words.",
    "reverse_string": lambda a: f"Reversed, it reads '{a['text'][::-1]}'.",
    "sort_numbers": sort,
    "unit_convert_length": length,
}


def answer(name: str, arguments: dict[str, Any]) -> str:
    """The worked answer to a request for catalogue function ``name`` with ``arguments``."""
    if name not in ANSWERS:
        raise KeyError(f"no worked answer for {name!r}; answerable here: {', '.join(sorted(ANSWERS))}")
    return ANSWERS[name](arguments)
