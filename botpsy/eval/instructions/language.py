"""Language identification for the language instructions, through ``langdetect``.

The official IFEval scorer calls ``langdetect.detect`` and counts the instruction as followed when
detection fails (text with no letters). ``langdetect`` samples n-grams at random; botpsy fixes its
seed once so that a verdict never changes between runs.

Example::

    >>> detect_language("Das ist ein kurzer deutscher Satz über das Wetter.")
    'de'
"""

from __future__ import annotations

import functools


@functools.cache
def _detector_factory():
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0
    return DetectorFactory


def detect_language(text: str) -> str | None:
    """ISO 639-1 code of ``text``'s language, or None when no language can be detected."""
    _detector_factory()
    from langdetect import LangDetectException, detect

    try:
        return detect(text)
    except LangDetectException:
        return None


def is_language(text: str, code: str) -> bool:
    """True when ``text`` is detected as ``code``, or when detection is impossible."""
    detected = detect_language(text)
    return detected is None or detected == code
