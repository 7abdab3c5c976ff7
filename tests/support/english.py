"""What of a Chinese sentence is still English: two English words in a row, outside code (`x`, a.b,
-log sigmoid) and outside a Python error's own text (after "SomethingError:")."""
import re

PHRASE = re.compile(r"(?<![\w.`-])[A-Za-z][a-z]{2,}(?: [a-z]{2,})+")
PYTHON_ERROR_TEXT = re.compile(r"\w+Error[:：] ?[^（]*")


def english_phrases(text: str) -> list[str]:
    return PHRASE.findall(PYTHON_ERROR_TEXT.sub("", text))
