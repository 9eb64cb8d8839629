"""The sample data behind the tiny demo: a judge task a ~0.4M-parameter model can learn on CPU.

The shipped `samples/tinyjudge_*.jsonl` files are this module's output (`judgeflow dev
demo-data DIR` writes them again; a test checks they are identical). Two sets per mode:

- **RL rows** (OpenJudge format): short questions, each with a helpful answer (label 4 /
  preferred) and an unhelpful one (label 0): a refusal, a deflection or an off-topic reply. The
  cue a judge needs is in the response text, so a tiny model can learn it from the reward.
- **SFT rows** (OpenJudge SFT `messages` format) on *other* questions, with the verdicts of a
  weak teacher: pointwise it hedges (mostly 3 for a helpful answer and 1 for an unhelpful one,
  the 4 or 0 the labels say only 30% of the time), pairwise it favours A (it picks B in only 40% of the pairs where B is
  better). SFT teaches the output format and this weak judgement; what GRPO adds on top —
  committing to the extremes, dropping the position bias — only the reward can teach.

Everything is seeded; the same code writes the same bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judgeflow.data.templates import render_pairwise, render_pointwise

__all__ = [
    "FILES",
    "TEACHER_COMMITS",
    "TEACHER_PICKS_B",
    "TEACHER_SCORES",
    "demo_rows",
    "write_demo_data",
]

_CAPITALS = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"),
    ("Germany", "Berlin"), ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Kenya", "Nairobi"),
    ("Peru", "Lima"), ("Norway", "Oslo"), ("Greece", "Athens"), ("Portugal", "Lisbon"),
    ("Austria", "Vienna"), ("Ireland", "Dublin"), ("Poland", "Warsaw"), ("Chile", "Santiago"),
    ("Cuba", "Havana"), ("Sweden", "Stockholm"), ("Finland", "Helsinki"), ("Denmark", "Copenhagen"),
]  # fmt: skip
_LEGS = [
    ("spider", 8), ("dog", 4), ("cat", 4), ("chicken", 2), ("ant", 6), ("horse", 4),
    ("duck", 2), ("bee", 6), ("crab", 10), ("cow", 4), ("octopus", 8), ("goose", 2),
]  # fmt: skip
_OPPOSITES = [
    ("hot", "cold"), ("up", "down"), ("big", "small"), ("fast", "slow"), ("light", "dark"),
    ("early", "late"), ("open", "closed"), ("full", "empty"), ("happy", "sad"), ("old", "new"),
    ("wet", "dry"), ("loud", "quiet"), ("hard", "soft"), ("rich", "poor"), ("near", "far"),
]  # fmt: skip
_PLURALS = [
    ("mouse", "mice"), ("child", "children"), ("foot", "feet"), ("tooth", "teeth"),
    ("goose", "geese"), ("man", "men"), ("leaf", "leaves"), ("knife", "knives"),
    ("person", "people"), ("wolf", "wolves"), ("box", "boxes"), ("city", "cities"),
]  # fmt: skip
_PAST = [
    ("go", "went"), ("see", "saw"), ("eat", "ate"), ("run", "ran"), ("write", "wrote"),
    ("swim", "swam"), ("buy", "bought"), ("think", "thought"), ("sing", "sang"),
    ("drink", "drank"), ("fly", "flew"), ("speak", "spoke"),
]  # fmt: skip
_LANGUAGES = [
    ("Brazil", "Portuguese"), ("Mexico", "Spanish"), ("France", "French"), ("Japan", "Japanese"),
    ("Germany", "German"), ("Italy", "Italian"), ("Russia", "Russian"), ("Greece", "Greek"),
    ("Sweden", "Swedish"), ("Turkey", "Turkish"),
]  # fmt: skip
_COLOURS = [
    ("a clear daytime sky", "blue"), ("fresh grass", "green"), ("snow", "white"),
    ("a ripe banana", "yellow"), ("coal", "black"), ("a ripe tomato", "red"),
    ("an orange", "orange"), ("a lemon", "yellow"), ("milk", "white"), ("a pumpkin", "orange"),
]  # fmt: skip

#: Unhelpful answers: they never address the question.
_UNHELPFUL = [
    "Sorry, I cannot help with that.",
    "Sorry, I don't know.",
    "Sorry, I am not sure. Please ask someone else.",
    "Sorry, that is not something I can answer.",
    "Sorry, no idea.",
    "Sorry, I would rather not say.",
    "Sorry, why do you want to know?",
    "Sorry, let us talk about something else.",
]
_THINK = "Check the response against the principles."
#: The weak teacher behind the SFT verdicts: true label -> the score it usually gives (a hedge),
#: and how often it commits to the true label instead.
TEACHER_SCORES = {4: 3, 0: 1}
TEACHER_COMMITS = 0.3
#: How often the teacher picks B when B is the better response (always A when A is).
TEACHER_PICKS_B = 0.4

FILES = {
    "pointwise": "tinyjudge_pointwise.jsonl",
    "pairwise": "tinyjudge_pairwise.jsonl",
    "pointwise_sft": "tinyjudge_pointwise_sft.jsonl",
    "pairwise_sft": "tinyjudge_pairwise_sft.jsonl",
}


def _questions() -> Iterator[tuple[str, str, str]]:
    """(family, question, helpful answer) for every question the generator knows."""
    for country, city in _CAPITALS:
        yield (
            "capitals",
            f"What is the capital of {country}?",
            f"The capital of {country} is {city}.",
        )
    for animal, n in _LEGS:
        yield "legs", f"How many legs does a {animal} have?", f"A {animal} has {n} legs."
    for word, opposite in _OPPOSITES:
        yield (
            "opposites",
            f"What is the opposite of {word}?",
            f"The opposite of {word} is {opposite}.",
        )
    for word, plural in _PLURALS:
        yield "plurals", f"What is the plural of {word}?", f"The plural of {word} is {plural}."
    for thing, colour in _COLOURS:
        yield "colours", f"What colour is {thing}?", f"{thing[0].upper()}{thing[1:]} is {colour}."
    for verb, past in _PAST:
        yield "verbs", f"What is the past tense of {verb}?", f"The past tense of {verb} is {past}."
    for country, language in _LANGUAGES:
        yield (
            "languages",
            f"What language is spoken in {country}?",
            f"People in {country} speak {language}.",
        )
    for a, b in [(3, 4), (6, 7), (5, 8), (9, 3), (7, 7), (8, 6)]:
        yield "arithmetic", f"What is {a} times {b}?", f"{a} times {b} is {a * b}."
    for a, b in [(2, 3), (4, 5), (7, 8), (6, 9), (12, 30), (15, 27), (21, 44), (9, 9), (11, 13)]:
        yield "arithmetic", f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."


def _openjudge(query: str, answers: list[tuple[str, dict[str, Any]]], source: str) -> dict:
    return {
        "input": [{"role": "user", "content": query}],
        "output": [
            {"answer": {"role": "assistant", "content": text, "label": label}}
            for text, label in answers
        ],
        "source": source,
    }


def demo_rows(seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The four sample sets, keyed like `FILES`."""
    rng = random.Random(seed)
    questions = list(_questions())
    rng.shuffle(questions)
    n_sft = len(questions) // 2  # SFT sees half of the questions; RL never sees those
    sft_questions, rl_questions = questions[:n_sft], questions[n_sft:]

    out: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    for family, query, helpful in rl_questions:
        unhelpful = rng.choice(_UNHELPFUL)
        source = f"tinyjudge/{family}"
        for text, score in ((helpful, 4), (unhelpful, 0)):
            out["pointwise"].append(_openjudge(query, [(text, {"helpfulness": score})], source))
        # Two pairs per question (two unhelpful answers), the helpful one first in one and
        # second in the other: balanced with or without prepare's position balancing.
        second = rng.choice([u for u in _UNHELPFUL if u != unhelpful])
        for a, b, better in ((helpful, unhelpful, "A"), (second, helpful, "B")):
            pair = [(a, {"preference": better}), (b, {"preference": better})]
            out["pairwise"].append(_openjudge(query, pair, source))
    for _, query, helpful in sft_questions:
        unhelpful = rng.choice(_UNHELPFUL)
        # The weak teacher hedges: mostly 3 for a helpful answer, 1 for an unhelpful one.
        for text, label in ((helpful, 4), (unhelpful, 0)):
            score = label if rng.random() < TEACHER_COMMITS else TEACHER_SCORES[label]
            verdict = f"<think>{_THINK}</think><score>{score}</score>"
            out["pointwise_sft"].append(_messages(render_pointwise(query, text), verdict))
        # ...and favours A: right when A is better, right only sometimes when B is.
        for first, second, better in ((helpful, unhelpful, "A"), (unhelpful, helpful, "B")):
            said = better if better == "A" or rng.random() < TEACHER_PICKS_B else "A"
            verdict = f"<think>{_THINK}</think><better>{said}</better>"
            out["pairwise_sft"].append(_messages(render_pairwise(query, first, second), verdict))
    return out


#: (English source, correct German, a German rendering that drops part of the sentence,
#: a German sentence that means something else).
_SENTENCES = [
    ("The cat sleeps on the sofa.", "Die Katze schläft auf dem Sofa.", "Die Katze schläft.", "Der Hund bellt laut."),
    ("I drink coffee every morning.", "Ich trinke jeden Morgen Kaffee.", "Ich trinke Kaffee.", "Er isst gern Brot."),
    ("The train leaves at noon.", "Der Zug fährt um zwölf Uhr ab.", "Der Zug fährt ab.", "Das Auto ist rot."),
    ("We live in a small town.", "Wir wohnen in einer kleinen Stadt.", "Wir wohnen.", "Sie singt ein Lied."),
    ("My brother plays football.", "Mein Bruder spielt Fußball.", "Mein Bruder spielt.", "Die Sonne scheint."),
    ("The shop closes at six.", "Der Laden schließt um sechs.", "Der Laden schließt.", "Ich lese ein Buch."),
    ("She writes a long letter.", "Sie schreibt einen langen Brief.", "Sie schreibt.", "Wir gehen nach Hause."),
    ("The children are playing outside.", "Die Kinder spielen draußen.", "Die Kinder.", "Der Tee ist heiß."),
    ("It is raining in Berlin.", "In Berlin regnet es.", "Es regnet.", "Das Fenster ist offen."),
    ("He forgot his keys.", "Er hat seine Schlüssel vergessen.", "Er hat vergessen.", "Die Blumen blühen."),
    ("The soup is too salty.", "Die Suppe ist zu salzig.", "Die Suppe.", "Mein Vater arbeitet viel."),
    ("Our flight was delayed.", "Unser Flug hatte Verspätung.", "Unser Flug.", "Das Kind lacht."),
    ("Please close the door.", "Bitte schließen Sie die Tür.", "Bitte die Tür.", "Ich mag Äpfel."),
    ("The museum is free on Sundays.", "Das Museum ist sonntags kostenlos.", "Das Museum ist.", "Der Schnee fällt."),
    ("They bought a new car.", "Sie haben ein neues Auto gekauft.", "Sie haben gekauft.", "Die Katze trinkt Milch."),
    ("The water is very cold.", "Das Wasser ist sehr kalt.", "Das Wasser.", "Er fährt mit dem Rad."),
    ("I am learning German.", "Ich lerne Deutsch.", "Ich lerne.", "Wir essen zu Abend."),
    ("The meeting starts soon.", "Die Besprechung beginnt bald.", "Die Besprechung.", "Das Buch ist alt."),
    ("Her garden is beautiful.", "Ihr Garten ist wunderschön.", "Ihr Garten.", "Der Bus kommt spät."),
    ("The baby is sleeping now.", "Das Baby schläft jetzt.", "Das Baby.", "Ich habe Hunger."),
    ("We walked to the lake.", "Wir sind zum See gelaufen.", "Wir sind gelaufen.", "Sie trinkt Wasser."),
    ("The bread is fresh today.", "Das Brot ist heute frisch.", "Das Brot.", "Der Lehrer spricht."),
    ("He works in a hospital.", "Er arbeitet in einem Krankenhaus.", "Er arbeitet.", "Die Straße ist nass."),
    ("The concert was excellent.", "Das Konzert war ausgezeichnet.", "Das Konzert.", "Ich kaufe Milch."),
]  # fmt: skip
#: Kind of candidate -> (score, what the analysis says about it).
_KINDS = {
    "correct": (9, "is correct"),
    "partial": (5, "leaves part out"),
    "wrong": (1, "means something else"),
}


def grrm_rows(seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """A tiny GRRM source (`train`, `test`): pairs of German candidates for a short English
    sentence, scored 9 / 5 / 1 (correct / incomplete / another meaning), with a one-line
    analysis per pair, best candidate first."""
    rng = random.Random(seed)
    out: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for i, (src, correct, partial, wrong) in enumerate(_SENTENCES):
        texts = {"correct": correct, "partial": partial, "wrong": wrong}
        for _ in range(4):
            kinds = rng.sample(list(_KINDS), k=2)  # pairs: a 2-layer model keeps two labels apart
            # Best first, as the ranking line will read (the tiny model copies the order).
            labelled = sorted(zip("ABC", kinds, strict=False), key=lambda lk: -_KINDS[lk[1]][0])
            analysis = " ".join(f"{label} {_KINDS[kind][1]}." for label, kind in labelled)
            out["test" if i % 6 == 5 else "train"].append(
                {
                    "src_text": src,
                    "src_lang": "en",
                    "trg_lang": "de",
                    "mt_texts": [texts[k] for k in kinds],
                    "scores": [_KINDS[k][0] for k in kinds],
                    "analysis": analysis,
                }
            )
    return out


def _messages(prompt: str, verdict: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": verdict},
        ]
    }


def write_demo_data(out_dir: str | Path, seed: int = 0) -> list[Path]:
    """Write the judge sample files and `grrm_tiny/{train,test}.jsonl` into `out_dir`."""
    out = Path(out_dir)
    files = {FILES[name]: rows for name, rows in demo_rows(seed).items()}
    files |= {f"grrm_tiny/{split}.jsonl": rows for split, rows in grrm_rows(seed).items()}
    written = []
    for name, rows in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
