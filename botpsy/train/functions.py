"""Varied function-calling examples beyond the device world (``botpsy data --functions N``).

The device world offers 60 tools, and a student trained on them alone learns their habits: on
unfamiliar functions (BFCL) it reaches for the verdict its data made commonest, a second made-up
call or a refusal (docs/recipe.md, "what the three tries share"). This module writes requests
against a catalogue of everyday functions from other domains (maths, finance, weather, travel,
sport, cooking, science, ...), each with typed parameters, an imperative description and request
templates whose slots are its parameters, so every request's gold call is known exactly.

Five kinds, the shapes general function calling takes:

- ``fn_single``: one function offered, the request fits it: one call;
- ``fn_multiple``: two to five functions offered, one fits: one call to it;
- ``fn_parallel``: the same function asked for several value sets (in one sentence, "... in Oslo,
  Lima and Cork", or one sentence each): one call each;
- ``fn_parallel_multiple``: two functions, each asked for once or twice;
- ``fn_irrelevant``: the functions offered cannot do what is asked: no call, a short answer. The
  request needs a tool (live data, an action), never something a model can answer itself.

And one kind drawn only on request (``botpsy data --functions-answer N``, ``answer_examples``):

- ``fn_answer``: a request the model can work out itself (an area, a factorial, a capital), with
  functions offered that cannot do it, often ones whose parameters have the request's shape (two
  numbers asked, ``weight`` and ``height`` offered): no call, the worked answer
  (``botpsy.train.answers``); with ``--functions-answer-paired`` each comes with its twin,
  ``fn_answer_call``: the same request with the fitting function offered too, and a call to it.

Every assistant turn's reasoning grounds its verdict in the text before it: what the user asks
for, which offered function does that (or that none does), what it needs and where the request
gives it. Function names vary in style (``snake_case``, ``module.name``, ``camelCase``) so the
student learns to copy a name, not recall one. The catalogue is plain data written for this
project; none of it comes from BFCL, IFEval or any other benchmark.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Callable

from botpsy.train.answers import ANSWERS, answer
from botpsy.train.trajectories import describe_arguments
from botpsy.world.words import CITIES, FIRST_NAMES, LAST_NAMES

KINDS = ("fn_single", "fn_multiple", "fn_parallel", "fn_parallel_multiple", "fn_irrelevant")
# Shares of the kinds (the single-call kinds lead, as in general use).
KIND_WEIGHTS = (0.25, 0.3, 0.15, 0.1, 0.2)
# How the reasoning opens. "purpose": "The user wants to <the fitting function's purpose>". Trained
# on that, fn2 restated the request as an offered function's purpose on BFCL's irrelevance items and
# then found that function fit (26 of its 33 misses there read "Of the N offered functions, X does
# that"). "quote": the request is quoted first, in the user's words, and each function's purpose is
# then compared with it ("which is what is asked" / "which is not what is asked"). Measured worse:
# fn3, trained on it, called a function on 27 of 28 BFCL irrelevance items, since the verdict comes
# at the first token after the quote (bench_out/student_sft_fn3_2026-12-07/).
REASONING_STYLES = ("purpose", "quote")
QUOTE_WORDS = 30
SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Param:
    """One parameter: JSON type, description, a value sampler and how a value reads in text.

    ``phrases`` (booleans only) is the text for True and for False."""

    name: str
    type: str
    description: str
    sample: Callable[[random.Random], Any]
    required: bool = True
    enum: tuple = ()
    items: str = ""
    phrases: tuple[str, str] = ("", "")

    def schema(self) -> dict:
        out: dict = {"type": self.type, "description": self.description}
        if self.enum:
            out["enum"] = list(self.enum)
        if self.type == "array":
            out["items"] = {"type": self.items or "string"}
        return out

    def text(self, value: Any) -> str:
        if self.type == "boolean":
            return self.phrases[0] if value else self.phrases[1]
        if self.type == "array":
            words = [str(v) for v in value]
            return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
        return str(value)


@dataclass(frozen=True)
class Function:
    """A catalogue function: ``asks`` are request templates whose ``{slots}`` are parameter names."""

    name: str
    domain: str
    description: str
    params: tuple[Param, ...]
    asks: tuple[str, ...]
    distinct: tuple[str, ...] = ()  # parameters that must not take the same value (from and to)

    def tool(self, name: str) -> dict:
        properties = {p.name: p.schema() for p in self.params}
        required = [p.name for p in self.params if p.required]
        return {"type": "function", "function": {"name": name, "description": self.description,
                "parameters": {"type": "object", "properties": properties, "required": required}}}

    @property
    def purpose(self) -> str:
        """The description as a verb phrase: "calculate the ..."."""
        text = self.description.split(". ")[0].rstrip(".")
        return text[0].lower() + text[1:]

    def problems(self) -> list[str]:
        names = {p.name for p in self.params}
        out = []
        for ask in self.asks:
            slots = set(SLOT.findall(ask))
            out += [f"{self.name}: slot {s!r} is not a parameter" for s in sorted(slots - names)]
            out += [f"{self.name}: required {p.name!r} missing from {ask!r}" for p in self.params
                    if p.required and p.name not in slots]
        return out


# --- value samplers ---------------------------------------------------------------------------

def pick(values: list | tuple) -> Callable[[random.Random], Any]:
    return lambda rng: rng.choice(values)


def ints(low: int, high: int, step: int = 1) -> Callable[[random.Random], int]:
    return lambda rng: rng.randrange(low, high + 1, step)


def floats(low: float, high: float, digits: int = 1) -> Callable[[random.Random], float]:
    return lambda rng: round(rng.uniform(low, high), digits)


def some(values: list | tuple, low: int = 2, high: int = 4) -> Callable[[random.Random], list]:
    return lambda rng: rng.sample(list(values), rng.randint(low, min(high, len(values))))


def numbers(low: int, high: int, count: tuple[int, int] = (3, 6)) -> Callable[[random.Random], list]:
    return lambda rng: [rng.randint(low, high) for _ in range(rng.randint(*count))]


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def year(rng: random.Random) -> int:
    return rng.randint(1990, 2025)


def date(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


BIG_CITIES = ("Tokyo", "Nairobi", "Toronto", "Mumbai", "Sao Paulo", "Cairo", "Sydney", "Chicago",
              "Berlin", "Madrid", "Seoul", "Lima", "Hanoi", "Dublin", "Vienna", "Austin", "Denver", "Manila")
PLACES = tuple(CITIES) + BIG_CITIES
COUNTRIES = ("Japan", "Kenya", "Canada", "India", "Brazil", "Egypt", "Australia", "Germany", "Spain",
             "Peru", "Vietnam", "Ireland", "Austria", "Norway", "Portugal", "Mexico", "Chile", "Ghana")
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "INR", "BRL", "SEK", "NOK", "MXN")
TICKERS = ("AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "GOOGL", "META", "NFLX", "INTC", "ORCL", "SAP", "ASML")
LANGUAGES = ("French", "Spanish", "German", "Japanese", "Portuguese", "Italian", "Korean", "Dutch", "Swahili")
DISHES = ("lentil soup", "banana bread", "pad thai", "risotto", "shakshuka", "apple pie", "falafel", "ramen")
INGREDIENTS = ("rice", "flour", "butter", "sugar", "milk", "oats", "tomatoes", "chickpeas", "salmon", "eggs")
ELEMENTS = ("hydrogen", "helium", "carbon", "oxygen", "iron", "gold", "silver", "copper", "neon", "sodium")
PLANETS = ("Mercury", "Venus", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune")
TEAMS = ("Lisbon Lions", "Oslo Owls", "Porto Pilots", "Denver Dragons", "Austin Arrows", "Seoul Sparks",
         "Dublin Dolphins", "Lima Lynx")
SPORTS = ("football", "basketball", "tennis", "cricket", "hockey", "volleyball")
ARTISTS = ("Nina Simone", "Miles Davis", "Fela Kuti", "Bjork", "Caetano Veloso", "Ravi Shankar", "Joni Mitchell")
GENRES = ("jazz", "rock", "classical", "hip hop", "folk", "electronic", "reggae")
BOOK_TOPICS = ("machine learning", "gardening", "Roman history", "astronomy", "chess", "photography", "economics")
SPECIES = ("red fox", "snow leopard", "blue whale", "monarch butterfly", "emperor penguin", "honey bee")
COMPANIES = ("Acme Corp", "Globex", "Initech", "Umbrella Labs", "Stark Tools", "Wayne Foods", "Hooli")
JOBS = ("data analyst", "nurse", "electrician", "software engineer", "teacher", "chef", "architect")
AIRPORTS = ("LIS", "OSL", "JFK", "NRT", "CDG", "FRA", "SYD", "GRU", "YYZ", "DXB", "SIN", "MAD")
WORDS = ("serendipity", "ephemeral", "ubiquitous", "resilience", "lucid", "meander", "quorum")
SHAPES_UNITS = ("cm", "m", "inches", "feet")
TEMP_UNITS = ("celsius", "fahrenheit")


def P(name, type_, description, sample, required=True, **kw) -> Param:  # noqa: N802 (reads as a table)
    return Param(name, type_, description, sample, required, **kw)


CATALOGUE: tuple[Function, ...] = (
    # maths and geometry
    Function("calculate_triangle_area", "geometry", "Calculate the area of a triangle from its base and height.",
             (P("base", "number", "Length of the base.", ints(2, 40)), P("height", "number", "Height of the triangle.", ints(2, 40)),
              P("unit", "string", "Unit of length.", pick(SHAPES_UNITS), required=False)),
             ("What is the area of a triangle with a base of {base} and a height of {height}?",
              "Find the area of a triangle whose base is {base} {unit} and height is {height} {unit}.")),
    Function("circle_circumference", "geometry", "Compute the circumference of a circle.",
             (P("radius", "number", "Radius of the circle.", ints(1, 50)),),
             ("How long is the circumference of a circle with radius {radius}?", "Circumference for a circle of radius {radius}, please.")),
    Function("solve_quadratic", "math", "Solve a quadratic equation a*x^2 + b*x + c = 0.",
             (P("a", "integer", "Coefficient of x squared.", ints(1, 9)), P("b", "integer", "Coefficient of x.", ints(-20, 20)),
              P("c", "integer", "Constant term.", ints(-30, 30))),
             ("Solve the quadratic equation with a={a}, b={b} and c={c}.", "Find the roots of {a}x^2 + {b}x + {c} = 0 (a={a}, b={b}, c={c}).")),
    Function("factorial", "math", "Return the factorial of a non-negative integer.",
             (P("n", "integer", "The number.", ints(3, 20)),),
             ("What is {n} factorial?", "Compute the factorial of {n}.")),
    Function("greatest_common_divisor", "math", "Find the greatest common divisor of two integers.",
             (P("num1", "integer", "First number.", ints(12, 400)), P("num2", "integer", "Second number.", ints(12, 400))),
             ("What's the GCD of {num1} and {num2}?", "Find the greatest common divisor of {num1} and {num2}.")),
    Function("mean_of_numbers", "math", "Compute the arithmetic mean of a list of numbers.",
             (P("numbers", "array", "The numbers.", numbers(1, 99), items="number"),),
             ("What is the average of {numbers}?", "Give me the mean of these values: {numbers}.")),
    Function("is_prime", "math", "Check whether an integer is a prime number.",
             (P("number", "integer", "The integer to check.", ints(2, 9999)),),
             ("Is {number} a prime number?", "Check if {number} is prime.")),
    Function("compound_interest", "finance", "Calculate the final amount of an investment with compound interest.",
             (P("principal", "number", "Initial amount.", ints(1000, 50000, 500)), P("rate", "number", "Yearly interest rate as a decimal.", pick((0.02, 0.03, 0.045, 0.05, 0.07))),
              P("years", "integer", "Number of years.", ints(1, 30)), P("times_per_year", "integer", "Compounding periods per year.", pick((1, 4, 12)), required=False)),
             ("How much will {principal} grow to at a rate of {rate} over {years} years?",
              "Compute compound interest on {principal} at rate {rate} for {years} years, compounded {times_per_year} times a year.")),
    # finance
    Function("convert_currency", "finance", "Convert an amount from one currency to another.",
             (P("amount", "number", "Amount to convert.", ints(5, 5000, 5)), P("from_currency", "string", "Currency code to convert from.", pick(CURRENCIES)),
              P("to_currency", "string", "Currency code to convert to.", pick(CURRENCIES))),
             ("Convert {amount} {from_currency} to {to_currency}.", "How much is {amount} {from_currency} in {to_currency}?"), distinct=("from_currency", "to_currency")),
    Function("get_stock_price", "finance", "Get the latest trading price of a stock.",
             (P("ticker", "string", "Stock ticker symbol.", pick(TICKERS)), P("exchange", "string", "Stock exchange.", pick(("NASDAQ", "NYSE", "XETRA")), required=False)),
             ("What's the current price of {ticker}?", "Get me the stock price of {ticker} on {exchange}.")),
    Function("loan_monthly_payment", "finance", "Calculate the monthly payment of a fixed-rate loan.",
             (P("loan_amount", "number", "Amount borrowed.", ints(5000, 400000, 5000)), P("annual_rate", "number", "Annual interest rate in percent.", pick((3.5, 4.2, 5.0, 6.1, 7.3))),
              P("term_years", "integer", "Length of the loan in years.", pick((5, 10, 15, 20, 30)))),
             ("What would I pay each month on a {loan_amount} loan at {annual_rate}% over {term_years} years?",
              "Monthly payment for a loan of {loan_amount} with an annual rate of {annual_rate} percent for {term_years} years.")),
    Function("company_revenue", "finance", "Look up a company's reported revenue for a year.",
             (P("company", "string", "Company name.", pick(COMPANIES)), P("year", "integer", "Fiscal year.", year)),
             ("What was {company}'s revenue in {year}?", "Find the revenue {company} reported for {year}.")),
    Function("split_bill", "finance", "Split a bill evenly between people, tip included.",
             (P("total", "number", "Bill total.", ints(20, 600)), P("people", "integer", "Number of people.", ints(2, 12)),
              P("tip_percent", "number", "Tip in percent.", pick((10, 12, 15, 18, 20)), required=False)),
             ("Split a {total} bill between {people} people.", "We are {people} people and the bill is {total}; split it with a {tip_percent}% tip.")),
    # weather and time
    Function("get_weather_forecast", "weather", "Get the weather forecast for a city.",
             (P("city", "string", "City name.", pick(PLACES)), P("days", "integer", "Number of days to forecast.", ints(1, 10), required=False),
              P("unit", "string", "Temperature unit.", pick(TEMP_UNITS), required=False, enum=TEMP_UNITS)),
             ("What's the weather going to be like in {city}?", "Give me a {days}-day forecast for {city} in {unit}.",
              "Forecast for {city} for the next {days} days, please.")),
    Function("get_air_quality", "weather", "Get the current air quality index of a location.",
             (P("location", "string", "City or area.", pick(PLACES)),),
             ("How is the air quality in {location} right now?", "Check the air quality index for {location}.")),
    Function("time_in_timezone", "time", "Get the current local time in a city.",
             (P("city", "string", "City name.", pick(PLACES)),),
             ("What time is it in {city}?", "Tell me the local time in {city}.")),
    Function("days_between_dates", "time", "Count the days between two dates.",
             (P("start_date", "string", "First date, YYYY-MM-DD.", date), P("end_date", "string", "Second date, YYYY-MM-DD.", date)),
             ("How many days are there between {start_date} and {end_date}?", "Count the days from {start_date} to {end_date}."), distinct=("start_date", "end_date")),
    Function("sunrise_sunset", "weather", "Get sunrise and sunset times for a place on a date.",
             (P("location", "string", "Place name.", pick(PLACES)), P("date", "string", "Date, YYYY-MM-DD.", date, required=False)),
             ("When does the sun rise and set in {location}?", "Sunrise and sunset times for {location} on {date}?")),
    # travel
    Function("search_flights", "travel", "Search flights between two airports on a date.",
             (P("origin", "string", "Departure airport code.", pick(AIRPORTS)), P("destination", "string", "Arrival airport code.", pick(AIRPORTS)),
              P("date", "string", "Departure date, YYYY-MM-DD.", date), P("passengers", "integer", "Number of travellers.", ints(1, 6), required=False)),
             ("Find flights from {origin} to {destination} on {date}.", "Search flights {origin} to {destination} for {passengers} people on {date}."), distinct=("origin", "destination")),
    Function("find_hotels", "travel", "Find hotels in a city within a nightly budget.",
             (P("city", "string", "City name.", pick(PLACES)), P("max_price", "number", "Highest price per night.", ints(60, 400, 10)),
              P("stars", "integer", "Minimum star rating.", ints(2, 5), required=False)),
             ("Find hotels in {city} under {max_price} a night.", "I need a hotel in {city} with at least {stars} stars, at most {max_price} per night.")),
    Function("travel_distance", "travel", "Get the driving distance between two cities.",
             (P("start", "string", "Starting city.", pick(PLACES)), P("end", "string", "Destination city.", pick(PLACES)),
              P("unit", "string", "Distance unit.", pick(("km", "miles")), required=False, enum=("km", "miles"))),
             ("How far is it to drive from {start} to {end}?", "Driving distance from {start} to {end} in {unit}?"), distinct=("start", "end")),
    Function("visa_requirements", "travel", "Check the visa rules for travelling from one country to another.",
             (P("citizenship", "string", "Traveller's country of citizenship.", pick(COUNTRIES)), P("destination", "string", "Country to visit.", pick(COUNTRIES))),
             ("Do citizens of {citizenship} need a visa for {destination}?", "What are the visa requirements for a {citizenship} citizen visiting {destination}?"), distinct=("citizenship", "destination")),
    Function("translate_text", "language", "Translate a text into another language.",
             (P("text", "string", "Text to translate.", pick(("good morning", "where is the station", "thank you very much", "how much does this cost", "see you tomorrow"))),
              P("target_language", "string", "Language to translate into.", pick(LANGUAGES))),
             ("Translate '{text}' into {target_language}.", "How do you say '{text}' in {target_language}?")),
    # sport and entertainment
    Function("team_standings", "sport", "Get a team's position in its league table for a season.",
             (P("team", "string", "Team name.", pick(TEAMS)), P("season", "integer", "Season year.", year, required=False)),
             ("Where are the {team} in the standings?", "What was the league position of the {team} in the {season} season?")),
    Function("player_statistics", "sport", "Get a player's statistics in a sport.",
             (P("player_name", "string", "Player's full name.", person), P("sport", "string", "The sport.", pick(SPORTS))),
             ("Show me the {sport} stats of {player_name}.", "How has {player_name} been doing in {sport}? Get the statistics.")),
    Function("match_schedule", "sport", "List upcoming matches of a team.",
             (P("team", "string", "Team name.", pick(TEAMS)), P("count", "integer", "How many matches to list.", ints(1, 8), required=False)),
             ("When do the {team} play next?", "List the next {count} matches of the {team}.")),
    Function("recommend_songs", "music", "Recommend songs in a genre.",
             (P("genre", "string", "Music genre.", pick(GENRES)), P("limit", "integer", "Number of songs.", ints(3, 20), required=False)),
             ("Recommend me some {genre} songs.", "Give me {limit} {genre} song recommendations.")),
    Function("artist_albums", "music", "List the albums released by an artist.",
             (P("artist", "string", "Artist name.", pick(ARTISTS)),),
             ("Which albums has {artist} released?", "List all albums by {artist}.")),
    Function("find_movie_showtimes", "entertainment", "Find cinema showtimes for a movie in a city.",
             (P("movie", "string", "Movie title.", pick(("The Long Harbour", "Paper Moons", "Night Train North", "Glass Garden", "Echo Valley"))),
              P("city", "string", "City.", pick(PLACES)), P("date", "string", "Date, YYYY-MM-DD.", date, required=False)),
             ("Where is {movie} showing in {city}?", "Find showtimes for {movie} in {city} on {date}.")),
    Function("board_game_rules", "entertainment", "Explain the rules of a board game.",
             (P("game", "string", "Board game name.", pick(("chess", "backgammon", "go", "checkers", "mahjong"))),),
             ("Explain how to play {game}.", "What are the rules of {game}?")),
    # food and health
    Function("find_recipe", "cooking", "Find a recipe for a dish.",
             (P("dish", "string", "Name of the dish.", pick(DISHES)), P("max_minutes", "integer", "Longest total cooking time in minutes.", ints(15, 120, 5), required=False),
              P("vegetarian", "boolean", "Only vegetarian recipes.", pick((True, False)), required=False, phrases=("vegetarian", "non-vegetarian"))),
             ("Find me a recipe for {dish}.", "I want a {vegetarian} recipe for {dish} that takes under {max_minutes} minutes.")),
    Function("nutrition_facts", "cooking", "Get the nutrition facts of a food for a given weight.",
             (P("food", "string", "Food name.", pick(INGREDIENTS)), P("grams", "number", "Weight in grams.", ints(50, 500, 10))),
             ("What are the nutrition facts of {grams} grams of {food}?", "How many calories and nutrients in {grams} g of {food}?")),
    Function("convert_cooking_units", "cooking", "Convert a cooking quantity between units.",
             (P("quantity", "number", "Amount to convert.", floats(0.5, 5, 1)), P("from_unit", "string", "Unit to convert from.", pick(("cups", "tablespoons", "ounces"))),
              P("to_unit", "string", "Unit to convert to.", pick(("grams", "millilitres", "teaspoons"))), P("ingredient", "string", "Ingredient.", pick(INGREDIENTS))),
             ("Convert {quantity} {from_unit} of {ingredient} to {to_unit}.", "How many {to_unit} is {quantity} {from_unit} of {ingredient}?")),
    Function("calculate_bmi", "health", "Calculate the body mass index from weight and height.",
             (P("weight_kg", "number", "Weight in kilograms.", ints(40, 130)), P("height_m", "number", "Height in metres.", floats(1.45, 2.05, 2))),
             ("What's the BMI of someone who weighs {weight_kg} kg and is {height_m} m tall?", "Compute my BMI: {weight_kg} kg, {height_m} m.")),
    Function("calories_burned", "health", "Estimate the calories burned by an activity.",
             (P("activity", "string", "The activity.", pick(("running", "cycling", "swimming", "walking", "rowing"))),
              P("minutes", "integer", "Duration in minutes.", ints(10, 120, 5)), P("weight_kg", "number", "Body weight in kilograms.", ints(45, 120), required=False)),
             ("How many calories does {minutes} minutes of {activity} burn?", "I weigh {weight_kg} kg; how many calories will I burn {activity} for {minutes} minutes?")),
    Function("find_doctor", "health", "Find doctors of a specialty near a city.",
             (P("specialty", "string", "Medical specialty.", pick(("dermatologist", "dentist", "cardiologist", "paediatrician"))),
              P("city", "string", "City.", pick(PLACES))),
             ("Find a {specialty} in {city}.", "I need a {specialty} near {city}.")),
    # science and nature
    Function("element_properties", "chemistry", "Get the properties of a chemical element.",
             (P("element", "string", "Element name.", pick(ELEMENTS)),),
             ("What are the properties of {element}?", "Tell me the atomic number and mass of {element}.")),
    Function("molar_mass", "chemistry", "Compute the molar mass of a chemical formula.",
             (P("formula", "string", "Chemical formula.", pick(("H2O", "CO2", "NaCl", "C6H12O6", "CH4", "NH3"))),),
             ("What is the molar mass of {formula}?", "Compute the molar mass for {formula}.")),
    Function("kinetic_energy", "physics", "Calculate the kinetic energy of a moving object.",
             (P("mass", "number", "Mass in kilograms.", ints(1, 2000)), P("velocity", "number", "Speed in metres per second.", ints(1, 90))),
             ("What's the kinetic energy of a {mass} kg object moving at {velocity} m/s?", "Kinetic energy for mass {mass} kg and velocity {velocity} m/s?")),
    Function("planet_distance", "astronomy", "Get the current distance from Earth to a planet.",
             (P("planet", "string", "Planet name.", pick(PLANETS)), P("unit", "string", "Distance unit.", pick(("km", "AU")), required=False, enum=("km", "AU"))),
             ("How far away is {planet} right now?", "Distance from Earth to {planet} in {unit}?")),
    Function("species_info", "biology", "Get facts about an animal species.",
             (P("species", "string", "Common name of the species.", pick(SPECIES)), P("include_habitat", "boolean", "Include where it lives.", pick((True, False)), required=False,
              phrases=("including its habitat", "without the habitat details"))),
             ("Tell me about the {species}.", "Give me facts on the {species}, {include_habitat}.")),
    Function("population_of_country", "geography", "Get the population of a country in a year.",
             (P("country", "string", "Country name.", pick(COUNTRIES)), P("year", "integer", "Year.", year, required=False)),
             ("What is the population of {country}?", "How many people lived in {country} in {year}?")),
    Function("capital_city", "geography", "Get the capital city of a country.",
             (P("country", "string", "Country name.", pick(COUNTRIES)),),
             ("What's the capital of {country}?", "Name the capital city of {country}.")),
    Function("elevation_of_place", "geography", "Get the elevation above sea level of a place.",
             (P("place", "string", "Place name.", pick(PLACES)),),
             ("How high above sea level is {place}?", "What's the elevation of {place}?")),
    # work, study, shopping, home
    Function("search_jobs", "work", "Search job listings by role and location.",
             (P("role", "string", "Job title.", pick(JOBS)), P("location", "string", "City.", pick(PLACES)),
              P("remote", "boolean", "Only remote jobs.", pick((True, False)), required=False, phrases=("remote", "on-site"))),
             ("Find {role} jobs in {location}.", "Look for {remote} {role} positions in {location}.")),
    Function("average_salary", "work", "Get the average salary for a job in a country.",
             (P("job_title", "string", "Job title.", pick(JOBS)), P("country", "string", "Country.", pick(COUNTRIES))),
             ("What does a {job_title} earn on average in {country}?", "Average salary of a {job_title} in {country}?")),
    Function("search_books", "education", "Search a library catalogue for books on a topic.",
             (P("topic", "string", "Topic to search.", pick(BOOK_TOPICS)), P("max_results", "integer", "Most results to return.", ints(3, 25), required=False)),
             ("Find books about {topic}.", "Search for up to {max_results} books on {topic}.")),
    Function("define_word", "education", "Look up the dictionary definition of a word.",
             (P("word", "string", "The word.", pick(WORDS)), P("language", "string", "Dictionary language.", pick(("English", "French", "Spanish")), required=False)),
             ("What does '{word}' mean?", "Define the word '{word}' in {language}.")),
    Function("grade_average", "math", "Compute the average of a student's grades.",
             (P("grades", "array", "Grades to average.", numbers(50, 100, (3, 5)), items="number"), P("student", "string", "Student's name.", person, required=False)),
             ("What's the average of the grades {grades}?", "Average the grades of {student}: {grades}.")),
    Function("compare_product_prices", "shopping", "Compare prices of a product across online stores.",
             (P("product", "string", "Product name.", pick(("noise cancelling headphones", "espresso machine", "running shoes", "e-reader", "air fryer"))),
              P("max_price", "number", "Highest acceptable price.", ints(30, 600, 10), required=False)),
             ("Compare prices for {product}.", "Find the best price for {product}, at most {max_price}.")),
    Function("track_parcel", "shopping", "Track a parcel by its tracking number.",
             (P("tracking_number", "string", "The tracking number.", lambda rng: f"{rng.choice('ABCDEFXZ')}{rng.randint(10**8, 10**9 - 1)}"),
              P("carrier", "string", "Delivery company.", pick(("DHL", "UPS", "FedEx", "PostNL")), required=False)),
             ("Where is my parcel {tracking_number}?", "Track {carrier} shipment {tracking_number}.")),
    Function("estimate_property_value", "real_estate", "Estimate the market value of a property.",
             (P("city", "string", "City.", pick(PLACES)), P("square_meters", "integer", "Floor area in square metres.", ints(35, 300, 5)),
              P("bedrooms", "integer", "Number of bedrooms.", ints(1, 6), required=False)),
             ("How much is a {square_meters} square metre flat in {city} worth?", "Estimate the value of a {bedrooms}-bedroom, {square_meters} m2 home in {city}.")),
    Function("plant_care", "home", "Get care instructions for a house plant.",
             (P("plant", "string", "Plant name.", pick(("monstera", "fiddle leaf fig", "snake plant", "basil", "orchid"))),),
             ("How do I take care of a {plant}?", "Care tips for my {plant}?")),
    Function("electricity_cost", "home", "Calculate the cost of running an appliance.",
             (P("watts", "number", "Power of the appliance in watts.", ints(50, 3000, 50)), P("hours", "number", "Hours of use.", ints(1, 24)),
              P("price_per_kwh", "number", "Electricity price per kWh.", pick((0.15, 0.22, 0.3, 0.35)))),
             ("What does it cost to run a {watts} W heater for {hours} hours at {price_per_kwh} per kWh?",
              "Electricity cost: {watts} watts, {hours} hours, {price_per_kwh} per kWh.")),
    Function("send_email", "communication", "Send an email to an address.",
             (P("to", "string", "Recipient's email address.", lambda rng: f"{rng.choice(FIRST_NAMES).lower()}@example.com"),
              P("subject", "string", "Subject line.", pick(("Meeting notes", "Invoice", "Weekend plans", "Project update"))),
              P("body", "string", "Message text.", pick(("See you at ten.", "Attached as promised.", "Thanks for your help!")), required=False)),
             ("Email {to} with the subject '{subject}'.", "Send an email to {to}, subject '{subject}', saying '{body}'.")),
    Function("create_calendar_event", "productivity", "Create an event in a calendar.",
             (P("title", "string", "Event title.", pick(("Dentist", "Team sync", "Yoga", "Parents' evening", "Budget review"))),
              P("date", "string", "Date, YYYY-MM-DD.", date), P("duration_minutes", "integer", "Length in minutes.", pick((15, 30, 45, 60, 90)), required=False)),
             ("Put '{title}' on my calendar for {date}.", "Create a {duration_minutes}-minute event called '{title}' on {date}.")),
    Function("random_password", "security", "Generate a random password.",
             (P("length", "integer", "Number of characters.", ints(8, 32)), P("include_symbols", "boolean", "Use symbols too.", pick((True, False)), required=False,
              phrases=("with symbols", "without symbols"))),
             ("Generate a {length}-character password.", "Make me a password of {length} characters {include_symbols}.")),
    Function("word_count", "text", "Count the words in a text.",
             (P("text", "string", "The text.", pick(("the quick brown fox jumps", "to be or not to be", "all that glitters is not gold", "rain falls softly on the roof"))),),
             ("How many words are in '{text}'?", "Count the words of this: '{text}'.")),
    Function("reverse_string", "text", "Reverse the characters of a string.",
             (P("text", "string", "String to reverse.", pick(WORDS)),),
             ("Reverse the string '{text}'.", "What is '{text}' spelled backwards?")),
    Function("sort_numbers", "math", "Sort a list of numbers.",
             (P("numbers", "array", "Numbers to sort.", numbers(-50, 200), items="number"),
              P("descending", "boolean", "Largest first.", pick((True, False)), required=False, phrases=("from largest to smallest", "from smallest to largest"))),
             ("Sort these numbers: {numbers}.", "Sort {numbers} {descending}.")),
    Function("list_museums", "travel", "List museums in a city.",
             (P("city", "string", "City.", pick(PLACES)), P("free_entry", "boolean", "Only museums with free entry.", pick((True, False)), required=False,
              phrases=("with free entry", "including paid ones"))),
             ("Which museums are there in {city}?", "List museums in {city} {free_entry}.")),
    Function("languages_spoken", "geography", "List the languages spoken in a country.",
             (P("country", "string", "Country name.", pick(COUNTRIES)),),
             ("Which languages are spoken in {country}?", "What languages do people speak in {country}?")),
    Function("shared_interests", "social", "Find the interests two people share.",
             (P("people", "array", "Names of the people.", lambda rng: [person(rng) for _ in range(2)], items="string"),),
             ("What interests do {people} have in common?", "Find shared interests between {people}.")),
    Function("vote_registration_deadline", "civic", "Get the voter registration deadline for an election.",
             (P("country", "string", "Country.", pick(COUNTRIES)), P("election_year", "integer", "Election year.", ints(2026, 2030))),
             ("When is the deadline to register to vote in {country} for {election_year}?", "Voter registration deadline, {country}, {election_year}?")),
    Function("genre_of_artist", "music", "Tell which genres an artist plays.",
             (P("artist", "string", "Artist name.", pick(ARTISTS)),),
             ("What genre does {artist} play?", "Which genres is {artist} known for?")),
    Function("unit_convert_length", "math", "Convert a length between units.",
             (P("value", "number", "The length.", ints(1, 500)), P("from_unit", "string", "Unit of the value.", pick(("km", "miles", "feet", "metres"))),
              P("to_unit", "string", "Unit to convert to.", pick(("km", "miles", "feet", "metres")))),
             ("Convert {value} {from_unit} to {to_unit}.", "How many {to_unit} are {value} {from_unit}?"), distinct=("from_unit", "to_unit")),
)


# Functions that can do each other's requests: never offered as the "none fits" alternative.
OVERLAPS = (frozenset({"mean_of_numbers", "grade_average"}),)


def overlapping(a: Function, b: Function) -> bool:
    return frozenset({a.name, b.name}) in OVERLAPS


# Requests a model can answer itself (a computation, a definition, a common fact). They are never
# the request of a none-fits example: its reply says "I can't", and the device world's irrelevant
# kind wants such a question answered, not declined. A student trained on "I can't compute the
# mean" stopped answering "what is 15% of 80?" (fn2: 27% of irrelevant device tasks, release 53%).
ANSWERABLE = frozenset({
    "calculate_triangle_area", "circle_circumference", "solve_quadratic", "factorial", "greatest_common_divisor",
    "mean_of_numbers", "is_prime", "compound_interest", "loan_monthly_payment", "split_bill", "days_between_dates",
    "translate_text", "board_game_rules", "convert_cooking_units", "calculate_bmi", "element_properties", "molar_mass",
    "kinetic_energy", "capital_city", "languages_spoken", "define_word", "grade_average", "word_count",
    "reverse_string", "sort_numbers", "genre_of_artist", "unit_convert_length", "random_password",
})


# --- name styles ------------------------------------------------------------------------------

def styled_name(function: Function, rng: random.Random) -> str:
    """The name a function is offered under: its own, ``domain.name`` or camelCase."""
    roll = rng.random()
    if roll < 0.6:
        return function.name
    if roll < 0.85:
        return f"{function.domain}.{function.name}"
    head, *rest = function.name.split("_")
    return head + "".join(word.capitalize() for word in rest)


# --- one request ------------------------------------------------------------------------------

def fill(function: Function, rng: random.Random) -> tuple[str, dict]:
    """A request for ``function`` and its gold arguments (exactly the parameters the text gives)."""
    return fill_template(function, rng.choice(function.asks), rng)


def fill_template(function: Function, ask: str, rng: random.Random) -> tuple[str, dict]:
    by_name = {p.name: p for p in function.params}
    values: dict = {}
    for slot in SLOT.findall(ask):
        if slot not in values:
            values[slot] = by_name[slot].sample(rng)
            taken = [values[d] for d in function.distinct if d != slot and d in values]
            while slot in function.distinct and values[slot] in taken:
                values[slot] = by_name[slot].sample(rng)
    text = SLOT.sub(lambda m: by_name[m.group(1)].text(values[m.group(1)]), ask)
    return text, {p.name: values[p.name] for p in function.params if p.name in values}


def fill_varying(function: Function, rng: random.Random, count: int) -> tuple[str, str, list[dict]] | None:
    """One sentence asking for ``count`` calls that differ in one parameter ("... in Oslo, Lima and
    Cork"): the text, the varied parameter and each call's arguments; None when the function has no
    template with a single-valued slot to vary or too few distinct values."""
    by_name = {p.name: p for p in function.params}
    options = [(ask, slot) for ask in function.asks for slot in dict.fromkeys(SLOT.findall(ask))
               if ask.count("{" + slot + "}") == 1 and by_name[slot].type not in ("boolean", "array")]
    if not options:
        return None
    ask, slot = rng.choice(options)
    text, base = fill_template(function, ask, rng)
    others = [base[d] for d in function.distinct if d != slot and d in base]
    varied: list = []
    for _ in range(40):
        value = by_name[slot].sample(rng)
        if value not in varied and value not in others:
            varied.append(value)
        if len(varied) == count:
            break
    if len(varied) < 2:
        return None
    words = [by_name[slot].text(v) for v in varied]
    joined = ", ".join(words[:-1]) + " and " + words[-1]
    text = SLOT.sub(lambda m: joined if m.group(1) == slot else by_name[m.group(1)].text(base[m.group(1)]), ask)
    return text, slot, [{**base, slot: value} for value in varied]


def grounding(function: Function, arguments: dict) -> str:
    required = [p.name for p in function.params if p.required]
    extra = [k for k in arguments if k not in required]
    needs = f"it needs {', '.join(required)}" if required else "it needs nothing"
    sentence = f"{needs}, and the request gives {describe_arguments({k: arguments[k] for k in required})}"
    if extra:
        sentence += f"; it also sets {describe_arguments({k: arguments[k] for k in extra})}"
    return sentence + "."


def offer(functions: list[Function], rng: random.Random) -> tuple[list[Function], dict[str, str]]:
    """The offered functions (each once, first occurrence kept) and the name each is offered under."""
    offered = list({f.name: f for f in functions}.values())
    return offered, {f.name: styled_name(f, rng) for f in offered}


def quoted(request: str) -> str:
    """The opening of quote-style reasoning: the request in the user's words (its first
    ``QUOTE_WORDS`` words, on one line).

    >>> print(quoted("Is it raining\\n- in Oslo?"))
    The user asks: "Is it raining - in Oslo?"
    """
    words = request.split()
    text = " ".join(words[:QUOTE_WORDS]) + (" ..." if len(words) > QUOTE_WORDS else "")
    return f'The user asks: "{text}"'


def one_call_reasoning(request: str, target: Function, name: str, offered: int, arguments: dict, quote: bool) -> str:
    """The reasoning before one call to ``target`` (offered as ``name`` among ``offered`` functions):
    which function does what is asked, then what it needs and where the request gives it."""
    which = f"Of the {offered} offered functions, {name}" if offered > 1 else name
    if quote:
        reasoning = f"{quoted(request)} {which} can {target.purpose}, which is what is asked."
    else:
        reasoning = f"The user wants to {target.purpose}. {which} does that."
    return f"{reasoning} One call: {grounding(target, arguments)}"


def call(name: str, arguments: dict, index: int) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}, "id": f"call_{index}"}


def example(kind: str, rng: random.Random, index: int, thinking_share: float = 0.5, reasoning_style: str = "purpose") -> dict:
    """One generated example of ``kind`` (see the module docstring); ``reasoning_style`` is one of
    ``REASONING_STYLES`` and changes the reasoning only, never the request, tools or calls."""
    if reasoning_style not in REASONING_STYLES:
        raise ValueError(f"unknown reasoning style {reasoning_style!r}; known: {', '.join(REASONING_STYLES)}")
    quote = reasoning_style == "quote"
    def draw(exclude: set[str]) -> Function:
        choices = [f for f in CATALOGUE if f.name not in exclude]
        return rng.choice(choices)

    if kind in ("fn_single", "fn_multiple"):
        target = draw(set())
        offered, names = offer([target] + ([] if kind == "fn_single" else [draw({target.name}) for _ in range(rng.randint(1, 4))]), rng)
        request, arguments = fill(target, rng)
        asked = [target.name]
        # The other offered functions are counted, never listed: a student trained on "A does
        # that; B, C do not" went on listing made-up names on BFCL items until the token cap.
        reasoning = one_call_reasoning(request, target, names[target.name], len(offered), arguments, quote)
        reply = {"role": "assistant", "content": "", "tool_calls": [call(names[target.name], arguments, 1)]}
    elif kind == "fn_parallel":
        target = draw(set())
        offered, names = offer([target] + [draw({target.name}) for _ in range(rng.randint(0, 2))], rng)
        count = rng.randint(2, 4)
        asked = [target.name]
        name = names[target.name]
        # Half the requests name several values in one sentence ("... in Oslo, Lima and Cork"), as
        # people ask; the rest are separate sentences, one per call.
        merged = fill_varying(target, rng, count) if rng.random() < 0.5 else None
        if merged:
            request, slot, calls = merged
            values = ", ".join(json.dumps(c[slot], ensure_ascii=False) for c in calls)
            opening = (f"{quoted(request)} {name} can {target.purpose}, and the request gives {len(calls)} values of "
                       f"{slot} ({values}); it takes one {slot} at a time, so each is one call." if quote else
                       f"The user wants to {target.purpose} for {len(calls)} values of {slot} ({values}); "
                       f"{name} takes one {slot} at a time, so each is one call.")
        else:
            asks = distinct_fills([target] * count, rng)
            request = join_requests([text for text, _ in asks], rng)
            calls = [args for _, args in asks]
            opening = (f"{quoted(request)} {name} can {target.purpose}, and the request asks for {len(calls)} "
                       f"different sets of values, so each is one call." if quote else
                       f"The user wants to {target.purpose}, for {len(calls)} different sets of values; "
                       f"{name} does that, so each is one call.")
        per_call = " ".join(f"Call {i}: {describe_arguments(args)}." for i, args in enumerate(calls, 1))
        reasoning = f"{opening} {per_call} They don't depend on each other, so I'll make them at once."
        reply = {"role": "assistant", "content": "", "tool_calls": [call(name, args, i) for i, args in enumerate(calls, 1)]}
    elif kind == "fn_parallel_multiple":
        first = draw(set())
        second = draw({first.name})
        offered, names = offer([first, second] + [draw({first.name, second.name}) for _ in range(rng.randint(0, 2))], rng)
        functions = [first] * rng.randint(1, 2) + [second] * rng.randint(1, 2)
        plan = list(zip(functions, distinct_fills(functions, rng)))
        request = join_requests([text for _, (text, _) in plan], rng)
        asked = [first.name, second.name]
        parts = " ".join(f"To {f.purpose}: {names[f.name]} with {describe_arguments(args)}." for f, (_, args) in plan)
        asks = f"{quoted(request)} It asks for {len(plan)} things." if quote else f"The request asks for {len(plan)} things."
        reasoning = f"{asks} {parts} They don't depend on each other, so I'll make the {len(plan)} calls at once."
        reply = {"role": "assistant", "content": "", "tool_calls": [call(names[f.name], args, i) for i, (f, (_, args)) in enumerate(plan, 1)]}
    elif kind == "fn_irrelevant":
        wanted = draw(ANSWERABLE)
        # Half the time the offered functions may share the request's domain (weather forecast
        # offered, air quality asked): near misses are the hard case; overlapping pairs never.
        kin = [f for f in CATALOGUE if f.domain == wanted.domain and f.name != wanted.name and not overlapping(f, wanted)]
        near = rng.sample(kin, k=min(len(kin), rng.randint(1, 2))) if kin and rng.random() < 0.5 else []
        others = [f for f in rng.sample(CATALOGUE, k=rng.randint(0 if near else 1, 3)) if f.domain != wanted.domain]
        offered, names = offer(near + others or [next(f for f in CATALOGUE if f.domain != wanted.domain)], rng)
        request, _ = fill(wanted, rng)
        asked = [wanted.name]
        # One offered function is named, the rest counted (a listed set invites made-up names).
        example_function = rng.choice(offered)
        one, purpose = names[example_function.name], example_function.purpose
        if quote:
            nearest = (f"The only offered function, {one}, can {purpose}, which is not what is asked" if len(offered) == 1 else
                       f"None of the {len(offered)} offered functions can do that ({one}, for one, can {purpose}, "
                       f"which is not what is asked)")
            reasoning = f"{quoted(request)} {nearest}, so I won't call any."
        else:
            nearest = (f"the only offered function, {one}, can {purpose}" if len(offered) == 1 else
                       f"none of the {len(offered)} offered functions does that ({one}, for one, can {purpose})")
            reasoning = f"The user wants to {wanted.purpose}, but {nearest}, so I won't call any."
        reply = {"role": "assistant", "content": rng.choice((
            f"I can't do that with the functions I have: none of them can {wanted.purpose}.",
            f"Sorry, none of the available tools can {wanted.purpose}, so I can't help with that here.",
            f"That isn't something my available functions can do (they can't {wanted.purpose})."))}
    elif kind == "fn_answer":
        wanted = rng.choice([f for f in CATALOGUE if f.name in ANSWERS])
        request, arguments = fill(wanted, rng)
        asked = [wanted.name]
        offered, names = offer(unfit_offer(wanted, rng), rng)
        example_function = rng.choice(offered)
        one, purpose = names[example_function.name], example_function.purpose
        nearest = (f"the only offered function, {one}, can {purpose}, which is not what is asked" if len(offered) == 1 else
                   f"none of the {len(offered)} offered functions does that ({one}, for one, can {purpose})")
        opening = f"{quoted(request)} I can work that out myself" if quote else f"The user wants to {wanted.purpose}, which I can work out myself"
        reasoning = f"{opening}; {nearest}, so I won't call any."
        reply = {"role": "assistant", "content": answer(wanted.name, arguments)}
        reply["arguments"] = arguments  # for answer_examples' paired twin; popped there, never trained on
    else:
        raise ValueError(f"unknown function-example kind {kind!r}; known: {', '.join(KINDS + ('fn_answer',))}")
    reply["reasoning_content"] = reasoning
    rng.shuffle(offered)
    messages = [{"role": "user", "content": request}, reply]
    return {"id": f"fn-{index:05d}", "task_id": f"fn-{index:05d}", "kind": kind, "domain": "functions", "group": "functions",
            "split": "train", "thinking": rng.random() < thinking_share, "messages": messages, "asked": asked,
            "tools": [f.tool(names[f.name]) for f in offered]}


def shape(function: Function) -> tuple[str, ...]:
    """The types of a function's required parameters, numbers merged: what a request's values
    could be pasted into.

    >>> shape(next(f for f in CATALOGUE if f.name == "calculate_bmi"))
    ('number', 'number')
    """
    return tuple(sorted("number" if p.type in ("number", "integer") else p.type for p in function.params if p.required))


def unfit_offer(wanted: Function, rng: random.Random) -> list[Function]:
    """One to three functions from other domains that cannot do ``wanted``'s request; in three of
    four draws the first shares its parameter shape (``shape``) when any function does."""
    others = [f for f in CATALOGUE if f.domain != wanted.domain and not overlapping(f, wanted)]
    alike = [f for f in others if shape(f) == shape(wanted)]
    first = rng.choice(alike) if alike and rng.random() < 0.75 else rng.choice(others)
    rest = [f for f in others if f.name != first.name]
    return [first] + rng.sample(rest, k=0 if rng.random() < 0.6 else rng.randint(1, 2))


def answer_examples(count: int, seed: int = 0, thinking_share: float = 0.5, reasoning_style: str = "purpose",
                    paired: bool = False) -> list[dict]:
    """``count`` ``fn_answer`` examples (ids ``fn-answer-NNNNN``), drawn apart from ``examples`` so
    that adding them leaves its draws unchanged. ``paired``: each is followed by its twin
    (``fitting_twin``), the same request with the fitting function offered too, answered by a call."""
    if count < 0:
        raise ValueError(f"--functions-answer must be 0 or more (got {count})")
    rng = random.Random(f"functions-answer-{seed}")
    out = []
    for i in range(count):
        row = example("fn_answer", rng, i, thinking_share, reasoning_style)
        arguments = row["messages"][1].pop("arguments")
        row = {**row, "id": f"fn-answer-{i:05d}", "task_id": f"fn-answer-{i:05d}"}
        out.append(row)
        if paired:
            out.append(fitting_twin(row, arguments, rng, thinking_share, reasoning_style))
    return out


def fitting_twin(row: dict, arguments: dict, rng: random.Random, thinking_share: float = 0.5,
                 reasoning_style: str = "purpose") -> dict:
    """An ``fn_answer`` example's twin (kind ``fn_answer_call``): the same request with the function
    that fits it offered beside the others, so the reply is a call to it. A student trained on
    ``fn_answer`` alone learned that a computable request is answered, offered function or not (fn6:
    12 of the 14 one-call BFCL items it lost were answered in text); with the twins the request alone
    no longer decides, only whether an offered function fits does."""
    wanted = next(f for f in CATALOGUE if f.name == row["asked"][0])
    request = row["messages"][0]["content"]
    name = styled_name(wanted, rng)
    tools = row["tools"] + [wanted.tool(name)]
    rng.shuffle(tools)
    reply = {"role": "assistant", "content": "", "tool_calls": [call(name, arguments, 1)],
             "reasoning_content": one_call_reasoning(request, wanted, name, len(tools), arguments, reasoning_style == "quote")}
    twin_id = row["id"] + "-call"
    return {**row, "id": twin_id, "task_id": twin_id, "kind": "fn_answer_call", "thinking": rng.random() < thinking_share,
            "messages": [row["messages"][0], reply], "tools": tools}


def with_unneeded_tools(rows: list[dict], share: float, seed: int = 0) -> list[dict]:
    """Everyday examples (``botpsy general``) with functions offered that they do not need: in about
    ``share`` of them one to three catalogue functions that need live data or act (never one in
    ``ANSWERABLE``, which an everyday request might want), drawn per example id, so the same seed
    gives the same tools. Their replies stay as they are: a direct answer, no call."""
    if not 0 <= share <= 1:
        raise ValueError(f"--general-tools must be between 0 and 1 (got {share})")
    unneeded = [f for f in CATALOGUE if f.name not in ANSWERABLE]
    out = []
    for row in rows:
        rng = random.Random(f"general-tools-{seed}-{row['id']}")
        if share and rng.random() < share:
            picked, names = offer(rng.sample(unneeded, k=rng.randint(1, 3)), rng)
            row = {**row, "tools": [f.tool(names[f.name]) for f in picked]}
        out.append(row)
    return out


def distinct_fills(functions: list[Function], rng: random.Random) -> list[tuple[str, dict]]:
    """A request for each function in turn, no two asking the same call (a repeat is redrawn)."""
    out: list[tuple[str, dict]] = []
    seen: set[str] = set()
    for function in functions:
        for _ in range(20):
            text, arguments = fill(function, rng)
            key = function.name + repr(sorted(arguments.items()))
            if key not in seen:
                break
        seen.add(key)
        out.append((text, arguments))
    return out


def join_requests(texts: list[str], rng: random.Random) -> str:
    style = rng.random()
    if style < 0.4:
        return " ".join(texts)
    if style < 0.7:
        return "\n".join(f"- {t}" for t in texts)
    return texts[0] + "".join(f" Also, {t[0].lower()}{t[1:]}" for t in texts[1:])


def examples(count: int, seed: int = 0, thinking_share: float = 0.5, reasoning_style: str = "purpose") -> list[dict]:
    """``count`` generated examples, kinds drawn by ``KIND_WEIGHTS``; the same seed gives the same list
    (and the same requests, tools and calls in either reasoning style)."""
    if count < 0:
        raise ValueError(f"--functions must be 0 or more (got {count})")
    rng = random.Random(f"functions-{seed}")
    kinds = rng.choices(KINDS, weights=KIND_WEIGHTS, k=count)
    return [example(kind, rng, i, thinking_share, reasoning_style) for i, kind in enumerate(kinds)]


def catalogue_problems() -> list[str]:
    """Template/parameter mismatches in the catalogue (empty when it is consistent)."""
    names = [f.name for f in CATALOGUE]
    dupes = sorted({n for n in names if names.count(n) > 1})
    return [f"duplicate function name {n}" for n in dupes] + [p for f in CATALOGUE for p in f.problems()]
