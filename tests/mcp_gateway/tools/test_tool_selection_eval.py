"""Tool-selection eval: do the tool descriptions separate what agents want to do?

A lexical stand-in for a model choosing a tool: each labelled intent (tool_intents.json) goes to
the tool whose name, title and description is nearest by TF-IDF cosine. The accuracy is printed
and must stay above FLOOR; and no two descriptions may be nearer each other than MAX_OVERLAP, so
a new or edited description that blurs two tools fails CI. A lexical model is the harsh case:
it has no synonyms, so descriptions must use the words agents use.
"""

import json
import math
import re
from collections import Counter
from itertools import combinations
from pathlib import Path

from mcp_gateway.tools import tool_definitions
from tests.mcp_gateway.tools.conftest import EVAL_SUMMARY

INTENTS = Path(__file__).with_name("tool_intents.json")
FLOOR = 0.85  # the measured figure: docs/tools.md
MAX_OVERLAP = 0.35
STOPWORDS = set(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "to",
        "we",
        "what",
        "with",
        "you",
        "your",
        "use",
        "one",
        "not",
    ]
)


def tokens(text: str) -> list[str]:
    words = re.findall(r"[a-z]+", text.lower().replace("_", " "))
    # A crude stemmer: enough to meet "decided"/"decision", "commitments"/"commitment".
    stems = [re.sub(r"(ions|ion|ing|ed|es|s)$", "", word) for word in words]
    return [stem for stem in stems if len(stem) > 1 and stem not in STOPWORDS]


def tfidf(documents: list[list[str]]) -> tuple[list[dict[str, float]], dict[str, float]]:
    frequency = Counter(term for document in documents for term in set(document))
    idf = {term: math.log((1 + len(documents)) / (1 + n)) + 1 for term, n in frequency.items()}
    return [vector(document, idf) for document in documents], idf


def vector(document: list[str], idf: dict[str, float]) -> dict[str, float]:
    counts = Counter(term for term in document if term in idf)
    weights = {term: (1 + math.log(n)) * idf[term] for term, n in counts.items()}
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {term: w / norm for term, w in weights.items()}


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    return sum(weight * b.get(term, 0.0) for term, weight in a.items())


def model():
    tools = tool_definitions()
    documents = [tokens(f"{t.name} {t.title} {t.description}") for t in tools]
    vectors, idf = tfidf(documents)
    return [t.name for t in tools], vectors, idf


def test_intents_cover_every_tool():
    intents = json.loads(INTENTS.read_text())["intents"]
    names, _, _ = model()
    assert len(intents) >= 40
    assert set(Counter(i["tool"] for i in intents)) == set(names)
    assert min(Counter(i["tool"] for i in intents).values()) >= 4


def test_descriptions_select_the_right_tool():
    names, vectors, idf = model()
    intents = json.loads(INTENTS.read_text())["intents"]
    misses = []
    for item in intents:
        query = vector(tokens(item["intent"]), idf)
        chosen = max(range(len(names)), key=lambda i: cosine(query, vectors[i]))
        if names[chosen] != item["tool"]:
            misses.append(f"{item['tool']} <- {names[chosen]}: {item['intent']}")
    accuracy = 1 - len(misses) / len(intents)
    EVAL_SUMMARY.append(
        f"tool-selection eval: accuracy {accuracy:.3f} ({len(intents) - len(misses)}/"
        f"{len(intents)} intents, TF-IDF nearest description), CI floor {FLOOR}"
    )
    print(
        f"\ntool-selection accuracy (TF-IDF nearest description): {accuracy:.3f} "
        f"over {len(intents)} intents; misses:\n  " + "\n  ".join(misses)
    )
    assert accuracy >= FLOOR, misses


def test_no_two_descriptions_overlap():
    names, vectors, _ = model()
    overlaps = {
        (names[i], names[j]): cosine(vectors[i], vectors[j])
        for i, j in combinations(range(len(names)), 2)
    }
    worst = max(overlaps, key=overlaps.get)
    EVAL_SUMMARY.append(
        f"tool-selection eval: largest description overlap {worst[0]}/{worst[1]} "
        f"{overlaps[worst]:.3f}, bound {MAX_OVERLAP}"
    )
    print(f"\nlargest description overlap: {worst} {overlaps[worst]:.3f}")
    assert overlaps[worst] < MAX_OVERLAP, worst
