"""Checkers for IFBench's format, custom-task and repetition instructions.

Format instructions constrain layout (nested brackets, indented stairs, bullet styles, CSV);
custom instructions are one-off tasks with a known answer shape (multiples of 7 from 10 to 50,
African countries in reverse order); repetition instructions compare the response with a span of
the prompt.

Example::

    >>> multiples("14, 21, 28, 35, 42, 49")
    True
    >>> no_whitespace("no spaces")
    False
"""

from __future__ import annotations

import csv
import io
import re
import string
import unicodedata

from botpsy.eval.instructions.ifbench_checks import PUNCTUATION, remove_punctuation, strip_punctuation
from botpsy.eval.instructions.sentences import split_sentences_by_rules
from botpsy.eval.instructions.words import word_tokenize

REPEAT_SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."
NORTHERN_CAPITALS = (
    "Reykjavik Helsinki Oslo Tallinn Stockholm Riga Moscow Copenhagen Vilnius Minsk Dublin Berlin "
    "Amsterdam Warsaw London Brussels Prague Luxembourg Paris Vienna Bratislava Budapest Vaduz "
    "Chisinau Bern Ljubljana Zagreb"
).split()
_CLOSERS = {")": "(", "]": "[", "}": "{"}


def ascii_fold(text: str) -> str:
    """``text`` with accents removed and non-ASCII characters dropped (São Tomé -> Sao Tome)."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


# --- format ------------------------------------------------------------------------------------

def parentheses(response: str) -> bool:
    """Some correctly closed group of (), [] and {} nests at least five levels deep."""
    stack: list[str] = []
    deepest = 0
    for char in response:
        if char in "([{":
            stack.append(char)
            deepest = max(deepest, len(stack))
        elif char in _CLOSERS:
            if stack and stack[-1] == _CLOSERS[char]:
                stack.pop()
                if deepest >= 5:
                    return True
            else:
                stack, deepest = [], 0
    return False


def quotes(response: str) -> bool:
    """Quotes nest at least three levels deep, alternating " and '."""
    stack: list[str] = []
    deepest = 0
    for char in response:
        if stack and char == stack[-1]:
            stack.pop()
            if deepest - len(stack) >= 3:
                return True
        elif char in "\"'":
            stack.append(char)
            deepest = max(deepest, len(stack))
    return False


def options(response: str, *, options: str) -> bool:
    """The response is exactly one of the offered options (letters must match exactly)."""
    if "/" in options:
        separator = "/"
    elif "or" in options:
        separator = "or"
    else:
        separator = ","
    choices = [choice.strip() for choice in options.split(separator)]
    if re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options):
        return response in choices
    answer = strip_punctuation(response).lower()
    return any(strip_punctuation(choice).lower() == answer for choice in choices)


def newline(response: str) -> bool:
    """Each word is on its own line."""
    text = remove_punctuation(response).strip()
    lines = [line for line in text.split("\n") if line != ""]
    return len(lines) == len(text.split())


def emoji_sentences(response: str) -> bool:
    """Every sentence ends with an emoji (before or after its final punctuation)."""
    import emoji

    sentences = split_sentences_by_rules(response)
    for index, sentence in enumerate(sentences):
        stripped = remove_punctuation(sentence).strip()
        if not stripped:
            return False
        if emoji.is_emoji(stripped[-1]) or emoji.is_emoji(stripped[-2:-1] or stripped[-1]):
            continue
        if index == len(sentences) - 1:
            return False
        following = remove_punctuation(sentences[index + 1]).strip()
        if not following or not emoji.is_emoji(following[0]):
            return False
    return True


def _official_blank_line_removal(lines: list[str]) -> list[str]:
    """Remove blank lines the way the official scorer does: with ``list.remove`` while iterating,
    so a blank line right after a removed one survives. Reproduced on purpose for agreement."""
    lines = list(lines)
    index = 0
    while index < len(lines):
        if not lines[index].strip():
            lines.remove(lines[index])
        index += 1
    return lines


def line_indent(response: str) -> bool:
    """Stairs: every line is indented with more spaces than the line before."""
    lines = _official_blank_line_removal(response.split("\n"))
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    return all(later > earlier for earlier, later in zip(indents, indents[1:]))


def quote_unquote(response: str) -> bool:
    """Every quoted phrase is followed by unquoted text (no two quotes in a row, no final quote)."""
    text = response.replace("“", '"').replace("”", '"').replace("'\"'", "")
    text = "".join(text.split())
    if '""' in text:
        return False
    stripped = text.strip(string.digits + PUNCTUATION.replace('"', ""))
    return not (stripped and stripped[-1] == '"')


def special_bullets(response: str, *, sep: str) -> bool:
    """The requested bullet marker is used at least twice."""
    return len(re.findall(re.escape(sep), response)) >= 2


def thesis(response: str) -> bool:
    """An HTML-italic (<i> or <em>) thesis followed by more text."""
    start = response.find("<i>")
    if start == -1:
        start = response.find("<em>")
        if start == -1:
            return False
    text = response[start:]
    end = text.find("</i>")
    if end == -1:
        end = text.find("</em>")
        if end == -1:
            return False
    return bool(text[3:end].strip()) and bool(text[end + 4:].strip())


def sub_bullets(response: str) -> bool:
    """Every ``*`` bullet is followed by at least one ``-`` sub-bullet before the next ``*``."""
    return all("-" in part for part in response.split("*")[1:])


def no_bullets_bullets(response: str) -> bool:
    """At least two sentences, then at least two ``*`` bullets and nothing after them."""
    sentences, bullets, in_prose = 0, 0, True
    for line in response.split("\n"):
        if line.strip().startswith("*"):
            in_prose = False
            if sentences < 2:
                return False
            bullets += 1
        elif in_prose:
            sentences += len(split_sentences_by_rules(line.strip()))
        else:
            return False
    return bullets >= 2


def title_case(response: str) -> bool:
    """Every word starts with a capital (all-caps words and single capitals allowed)."""
    for token in word_tokenize(response):
        if not token or not token[0].isalpha():
            continue
        if len(token) == 1:
            if token.islower():
                return False
        elif token[0].islower() and (token[1:].isupper() or token[1:].islower()):
            return False
    return True


def output_template(response: str) -> bool:
    """Uses the template labels "My Answer:", "My Conclusion:" and "Future Outlook:"."""
    return all(label in response for label in ("My Answer:", "My Conclusion:", "Future Outlook:"))


def no_whitespace(response: str) -> bool:
    """No whitespace characters at all."""
    return not any(char.isspace() for char in response)


# --- custom ------------------------------------------------------------------------------------

def multiples(response: str) -> bool:
    """Prints exactly the multiples of 7 between 10 and 50, in order."""
    return re.findall(r"\d+", response.replace(",", ", ")) == [str(n) for n in range(14, 51, 7)]


def _mcq_question(block: str) -> tuple[int, int]:
    """(number of A-E options, length of the question text before them) of one question."""
    text, options_seen, answering = "", 0, False
    for line in block.split("\n"):
        if re.match(r"^[A-Ea-e][\.|\)]\s*\w+", line.strip()):
            options_seen += 1
            answering = True
        elif not answering:
            text += " " + line.strip()
    return options_seen, len(text.strip())


def mcq_count_length(response: str) -> bool:
    """Four "Question" blocks with five options each, getting progressively longer."""
    if not response.startswith("Question"):
        return False
    blocks = re.split(r"\n*(?:Question \d+[\.|\):;]?\s*)", response)
    blocks = [b.strip() for b in blocks if b.strip()]
    if len(blocks) != 4:
        return False
    shapes = [_mcq_question(block) for block in blocks]
    if any(count != 5 for count, _ in shapes):
        return False
    return all(a[1] < b[1] for a, b in zip(shapes, shapes[1:]))


def reverse_newline(response: str) -> bool:
    """From Zimbabwe on, at least 52 lines in reverse alphabetical order."""
    lines = [strip_punctuation(line) for line in response.split("\n")]
    lines = [line for line in lines if line]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [ascii_fold(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


def word_reverse(response: str) -> bool:
    """Read backwards word by word, the answer is one sentence mentioning the bald eagle."""
    text = remove_punctuation(response.lower().strip())
    text = " ".join(text.split()[::-1])
    return "bald eagle" in text and text in split_sentences_by_rules(text)


def character_reverse(response: str) -> bool:
    """The answer is written backwards letter by letter ("elgae dlab")."""
    return "elgae dlab" in response.lower()


def sentence_alphabet(response: str) -> bool:
    """26 sentences whose first letters run from a to z."""
    sentences = split_sentences_by_rules(response)
    if len(sentences) != 26:
        return False
    for letter, sentence in zip(string.ascii_lowercase, sentences):
        stripped = sentence.lstrip(PUNCTUATION + string.whitespace)
        if not stripped or stripped[0].lower() != letter:
            return False
    return True


def european_capitals_sort(response: str) -> bool:
    """The European capitals north of 45 degrees, comma separated, from north to south."""
    capitals = [c.strip() for c in ascii_fold(response).split(",") if c.strip()]
    return capitals == NORTHERN_CAPITALS


def csv_city(response: str) -> bool:
    """CSV with header ID,Country,City,Year,Count and seven five-field rows."""
    rows = list(csv.reader(io.StringIO(response)))
    return (
        len(rows) == 8
        and rows[0] == ["ID", "Country", "City", "Year", "Count"]
        and all(len(row) == 5 for row in rows[1:])
    )


def csv_special_character(response: str) -> bool:
    """Product CSV with 14 rows, one field holding a special character in double quotes."""
    header = response.split("\n")[0].strip()
    names = ("ProductID", "Category", "Brand", "Price", "Stock")
    if not re.match("^" + r",[ \t]*".join(f'({n}|"{n}")' for n in names) + "$", header):
        return False
    # Tripling the quotes keeps them in the parsed fields, so quoting can be seen after parsing.
    rows = list(csv.reader(io.StringIO(response.replace('"', '"""'))))
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
            return True
    return False


def csv_quotes(response: str) -> bool:
    """Tab-separated student CSV, three rows, every field in double quotes."""
    header = response.split("\n")[0].strip()
    names = ("StudentID", "Subject", "Grade", "Semester", "Score")
    if not re.match("^" + r"\t *".join(f'({n}|"{n}")' for n in names) + "$", header):
        return False
    rows = list(csv.reader(io.StringIO(response.replace('"', '"""')), delimiter="\t"))
    if len(rows) != 4:
        return False
    for row in rows:
        if len(row) != 5:
            return False
        if not all(field.strip()[:1] == '"' and field.strip()[-1:] == '"' for field in row):
            return False
    return True


def date_format_list(response: str) -> bool:
    """Comma-separated YYYY-MM-DD dates, plausible for Napoleon's battles (1769-1821)."""
    days_in_month = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}
    for date in response.strip().split(","):
        date = date.strip()
        if not re.match(r"^\d{4}-\d{2}-\d{2}$", date):
            return False
        year, month, day = (int(part) for part in date.split("-"))
        if not 1769 <= year <= 1821 or month > 12 or day > days_in_month.get(month, 31):
            return False
    return True


# --- repeat ------------------------------------------------------------------------------------

def repeat_change(response: str, *, prompt_to_repeat: str) -> bool:
    """The request repeated with only its first word changed."""
    if response == prompt_to_repeat:
        return False
    return prompt_to_repeat.split()[1:] == response.split()[1:]


def repeat_simple(response: str) -> bool:
    """Only the fixed sentence, nothing else."""
    return response.strip().lower() == REPEAT_SIMPLE_SENTENCE.lower()


def repeat_span(response: str, *, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    """Exactly the requested span of the prompt."""
    span = " ".join(prompt_to_repeat.split()[n_start:n_end + 1])
    return response.strip().lower() == span.strip().lower()


CHECKS = {
    "format:parentheses": parentheses,
    "format:quotes": quotes,
    "format:options": options,
    "format:newline": newline,
    "format:emoji": emoji_sentences,
    "format:line_indent": line_indent,
    "format:quote_unquote": quote_unquote,
    "format:list": special_bullets,
    "format:thesis": thesis,
    "format:sub-bullets": sub_bullets,
    "format:no_bullets_bullets": no_bullets_bullets,
    "format:title_case": title_case,
    "format:output_template": output_template,
    "format:no_whitespace": no_whitespace,
    "custom:multiples": multiples,
    "custom:mcq_count_length": mcq_count_length,
    "custom:reverse_newline": reverse_newline,
    "custom:word_reverse": word_reverse,
    "custom:character_reverse": character_reverse,
    "custom:sentence_alphabet": sentence_alphabet,
    "custom:european_capitals_sort": european_capitals_sort,
    "custom:csv_city": csv_city,
    "custom:csv_special_character": csv_special_character,
    "custom:csv_quotes": csv_quotes,
    "custom:date_format_list": date_format_list,
    "repeat:repeat_change": repeat_change,
    "repeat:repeat_simple": repeat_simple,
    "repeat:repeat_span": repeat_span,
}
