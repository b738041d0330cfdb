"""The worked answers of ``fn_answer`` examples are right (checked against values worked by hand)."""

from __future__ import annotations

import pytest

from botpsy.train.answers import ANSWERS, CAPITALS, answer
from botpsy.train.functions import ANSWERABLE, CATALOGUE, COUNTRIES


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("calculate_triangle_area", {"base": 10, "height": 5, "unit": "cm"}, "The area is 25 square cm"),
    ("circle_circumference", {"radius": 1}, "≈ 6.28."),
    ("solve_quadratic", {"a": 1, "b": -3, "c": 2}, "two real roots: x ≈ 2 and x ≈ 1."),
    ("solve_quadratic", {"a": 1, "b": 2, "c": 1}, "one repeated root: x = -1."),
    ("solve_quadratic", {"a": 1, "b": 0, "c": 4}, "complex roots are 0 ± 2i."),
    ("factorial", {"n": 10}, "10! = 3,628,800."),
    ("greatest_common_divisor", {"num1": 84, "num2": 36}, "is 12."),
    ("mean_of_numbers", {"numbers": [1, 2, 3, 4]}, "The mean is 2.5 (10 ÷ 4)."),
    ("is_prime", {"number": 97}, "Yes, 97 is prime."),
    ("is_prime", {"number": 1001}, "it is 7 × 143."),
    ("compound_interest", {"principal": 1000, "rate": 0.1, "years": 2}, "about 1,210 after 2 years (interest 210)"),
    ("loan_monthly_payment", {"loan_amount": 100000, "annual_rate": 6.0, "term_years": 30}, "about 599.55"),
    ("split_bill", {"total": 100, "people": 4, "tip_percent": 20}, "pays about 30 (total 120 with a 20% tip)"),
    ("days_between_dates", {"start_date": "2026-03-01", "end_date": "2026-02-01"}, "There are 28 days"),
    ("calculate_bmi", {"weight_kg": 80, "height_m": 2.0}, "The BMI is 20 "),
    ("kinetic_energy", {"mass": 2, "velocity": 3}, "= 9 J."),
    ("unit_convert_length", {"value": 10, "from_unit": "km", "to_unit": "miles"}, "about 6.21 miles"),
    ("sort_numbers", {"numbers": [3, -1, 2], "descending": True}, "In descending order: 3, 2 and -1."),
    ("reverse_string", {"text": "abc"}, "'cba'"),
    ("word_count", {"text": "all that glitters"}, "has 3 words"),
    ("capital_city", {"country": "Canada"}, "is Ottawa."),
])
def test_worked_answers(name, arguments, expected):
    assert expected in answer(name, arguments)


def test_every_answer_is_for_an_answerable_catalogue_function():
    names = {f.name for f in CATALOGUE}
    assert set(ANSWERS) <= ANSWERABLE <= names
    assert set(CAPITALS) == set(COUNTRIES)
    with pytest.raises(KeyError, match="no worked answer for 'get_stock_price'"):
        answer("get_stock_price", {"ticker": "AAPL"})


def test_doctests():
    import doctest

    from botpsy.train import answers, functions

    assert doctest.testmod(answers).failed == 0 and doctest.testmod(functions).failed == 0
