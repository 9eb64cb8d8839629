"""The sample data behind the tiny demo: a judge task a ~0.56M-parameter model can learn on CPU.

The shipped `samples/tinyjudge_*.jsonl` files are this module's output (`judgeflow dev
demo-data DIR` writes them again; a test checks they are identical). The questions are split
three ways, so no question is in two sets:

- **RL rows** (OpenJudge format, `tinyjudge_<mode>.jsonl`): short questions, each with a
  helpful answer (label 4 / preferred) and a non-answer (label 0): an apology, a refusal or a
  deflection from `SEEN_NON_ANSWERS`. The cue a judge needs is in the response text, so a tiny
  model can learn it from the reward.
- **SFT rows** (OpenJudge SFT `messages` format, `tinyjudge_<mode>_sft.jsonl`) with the
  verdicts of a weak teacher: pointwise it hedges (mostly 3 for a helpful answer and 1 for a
  non-answer, the 4 or 0 the labels say only 30% of the time), pairwise it favours A (it picks B
  in only 40% of the pairs where B is better). SFT teaches the output format and this weak
  judgement; what GRPO adds on top — committing to the extremes, dropping the position bias —
  only the reward can teach.
- **Validation rows** (`tinyjudge_<mode>_val.jsonl`, the tiny profile's `data.val_source`): each
  question with its helpful answer, a non-answer phrased as in training, and one phrased in a
  way no training or SFT row uses (`UNSEEN_NON_ANSWERS`). Their `source` names the subset
  (`tinyjudge/helpful`, `tinyjudge/seen-non-answer`, `tinyjudge/unseen-non-answer`), so the
  evaluation reports how the judge does on phrasings it never saw.

The task is easy on purpose, and `RULES` holds one-line rules that read it from the surface;
`benchmarks/demo_seeds.py` scores them beside the trained judges.

Everything is seeded; the same code writes the same bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from judgeflow.data.templates import render_pairwise, render_pointwise

__all__ = [
    "FILES",
    "RULES",
    "SEEN_NON_ANSWERS",
    "TEACHER_COMMITS",
    "TEACHER_PICKS_B",
    "TEACHER_SCORES",
    "UNSEEN_NON_ANSWERS",
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
_SOUNDS = [
    ("cow", "moo"), ("dog", "woof"), ("cat", "meow"), ("duck", "quack"), ("sheep", "baa"),
    ("owl", "hoot"), ("lion", "roar"), ("snake", "hiss"),
]  # fmt: skip
_SIDES = [
    ("triangle", 3), ("square", 4), ("pentagon", 5), ("hexagon", 6), ("octagon", 8),
    ("rectangle", 4), ("heptagon", 7), ("decagon", 10),
]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

#: Non-answers of the training and SFT rows (and of the validation split's "seen" subset):
#: apologies, refusals and deflections, each opening differently; none addresses the question.
SEEN_NON_ANSWERS = [
    "Sorry, I cannot help with that.",
    "Sorry, no idea.",
    "I would rather not say.",
    "Why do you want to know?",
    "Let us talk about something else.",
    "Ask someone else, please.",
    "Honestly, I have no clue.",
    "No comment.",
    "Could you ask me something else?",
    "Good question, but I will pass.",
    "Hmm, tough to tell.",
    "Never mind that.",
    "Well, who can say?",
    "Not sure, sorry.",
    "Try searching the internet.",
    "Beats me.",
    "Interesting, but I cannot answer.",
    "Unfortunately I do not know.",
    "Perhaps another time.",
    "Whatever you think is fine.",
]
#: Non-answers that only the validation split holds, phrased unlike any training row (no first
#: word in common with a training non-answer).
UNSEEN_NON_ANSWERS = [
    "Nobody really knows.",
    "Please look it up yourself.",
    "That is a question for a teacher.",
    "Maybe. It is tricky to say.",
    "It depends on many things.",
    "What a strange question.",
    "You should already know this.",
    "My answer would not help you.",
]
#: One-line rules that judge this data from its surface: the response -> helpful (True) or not.
RULES: dict[str, Callable[[str, str], bool]] = {
    "starts with 'Sorry' -> 0, else 4": lambda query, response: not response.startswith("Sorry"),
    "shares a word with the query -> 4, else 0": lambda query, response: bool(
        _words(query) & _words(response)
    ),
}
_STOP_WORDS = {"", "a", "an", "the", "is", "of", "what", "how", "many", "does", "do", "in"}
_THINK = "Check the response against the principles."
#: The weak teacher behind the SFT verdicts: true label -> the score it usually gives (a hedge),
#: and how often it commits to the true label instead.
TEACHER_SCORES = {4: 3, 0: 1}
TEACHER_COMMITS = 0.3
#: How often the teacher picks B when B is the better response (always A when A is).
TEACHER_PICKS_B = 0.4
#: Questions held out for the validation split, and those the SFT rows use; RL trains on the rest.
N_VAL_QUESTIONS = 30
N_SFT_QUESTIONS = 50

FILES = {
    "pointwise": "tinyjudge_pointwise.jsonl",
    "pairwise": "tinyjudge_pairwise.jsonl",
    "pointwise_sft": "tinyjudge_pointwise_sft.jsonl",
    "pairwise_sft": "tinyjudge_pairwise_sft.jsonl",
    "pointwise_val": "tinyjudge_pointwise_val.jsonl",
    "pairwise_val": "tinyjudge_pairwise_val.jsonl",
}


def _words(text: str) -> set[str]:
    return {w.strip(".,?!").lower() for w in text.split()} - _STOP_WORDS


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
    for animal, sound in _SOUNDS:
        yield "sounds", f"What sound does a {animal} make?", f"A {animal} says {sound}."
    for shape, n in _SIDES:
        yield "shapes", f"How many sides does a {shape} have?", f"A {shape} has {n} sides."
    for day, after in zip(_DAYS, _DAYS[1:] + _DAYS[:1], strict=True):
        yield "days", f"What day comes after {day}?", f"The day after {day} is {after}."
    for a, b in [(3, 4), (6, 7), (5, 8), (9, 3), (7, 7), (8, 6)]:
        yield "arithmetic", f"What is {a} times {b}?", f"{a} times {b} is {a * b}."
    for a, b in [(2, 3), (4, 5), (7, 8), (6, 9), (12, 30), (15, 27), (21, 44), (9, 9), (11, 13)]:
        yield "arithmetic", f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    for a, b in [(9, 4), (15, 7), (20, 8), (12, 5), (30, 12), (17, 9)]:
        yield "arithmetic", f"What is {a} minus {b}?", f"{a} minus {b} is {a - b}."


def _openjudge(query: str, answers: list[tuple[str, dict[str, Any]]], source: str) -> dict:
    return {
        "input": [{"role": "user", "content": query}],
        "output": [
            {"answer": {"role": "assistant", "content": text, "label": label}}
            for text, label in answers
        ],
        "source": source,
    }


def _pair(query: str, better_text: str, worse_text: str, better: str, source: str) -> dict:
    a, b = (better_text, worse_text) if better == "A" else (worse_text, better_text)
    return _openjudge(query, [(a, {"preference": better}), (b, {"preference": better})], source)


def demo_rows(seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The six sample sets, keyed like `FILES`."""
    rng = random.Random(seed)
    questions = list(_questions())
    rng.shuffle(questions)
    val_questions = questions[:N_VAL_QUESTIONS]
    sft_questions = questions[N_VAL_QUESTIONS : N_VAL_QUESTIONS + N_SFT_QUESTIONS]
    rl_questions = questions[N_VAL_QUESTIONS + N_SFT_QUESTIONS :]

    out: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    for family, query, helpful in rl_questions:
        unhelpful, second = rng.sample(SEEN_NON_ANSWERS, k=2)
        source = f"tinyjudge/{family}"
        for text, score in ((helpful, 4), (unhelpful, 0)):
            out["pointwise"].append(_openjudge(query, [(text, {"helpfulness": score})], source))
        # Two pairs per question (two non-answers), the helpful one first in one and second in
        # the other: balanced with or without prepare's position balancing.
        out["pairwise"].append(_pair(query, helpful, unhelpful, "A", source))
        out["pairwise"].append(_pair(query, helpful, second, "B", source))
    for _, query, helpful in sft_questions:
        unhelpful = rng.choice(SEEN_NON_ANSWERS)
        # The weak teacher hedges: mostly 3 for a helpful answer, 1 for a non-answer.
        for text, label in ((helpful, 4), (unhelpful, 0)):
            score = label if rng.random() < TEACHER_COMMITS else TEACHER_SCORES[label]
            verdict = f"<think>{_THINK}</think><score>{score}</score>"
            out["pointwise_sft"].append(_messages(render_pointwise(query, text), verdict))
        # ...and favours A: right when A is better, right only sometimes when B is.
        for first, second, better in ((helpful, unhelpful, "A"), (unhelpful, helpful, "B")):
            said = better if better == "A" or rng.random() < TEACHER_PICKS_B else "A"
            verdict = f"<think>{_THINK}</think><better>{said}</better>"
            out["pairwise_sft"].append(_messages(render_pairwise(query, first, second), verdict))
    for _, query, helpful in val_questions:
        seen, second = rng.sample(SEEN_NON_ANSWERS, k=2)
        unseen = rng.choice(UNSEEN_NON_ANSWERS)
        for text, score, subset in (
            (helpful, 4, "helpful"),
            (seen, 0, "seen-non-answer"),
            (unseen, 0, "unseen-non-answer"),
        ):
            row = _openjudge(query, [(text, {"helpfulness": score})], f"tinyjudge/{subset}")
            out["pointwise_val"].append(row)
        # A third of the pairs have an unseen non-answer, as a third of the pointwise rows do.
        # One order each; prepare writes every validation pair in both A/B orders.
        for worse, subset in (
            (seen, "seen-non-answer"),
            (second, "seen-non-answer"),
            (unseen, "unseen-non-answer"),
        ):
            better = rng.choice("AB")
            out["pairwise_val"].append(_pair(query, helpful, worse, better, f"tinyjudge/{subset}"))
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
    files = {FILES[name]: rows for name, rows in demo_rows(seed).items()}
    files |= {f"grrm_tiny/{split}.jsonl": rows for split, rows in grrm_rows(seed).items()}
    return write_jsonl_files(out_dir, files)


def write_jsonl_files(out_dir: str | Path, files: dict[str, list[dict[str, Any]]]) -> list[Path]:
    """Each file (a name under `out_dir`) as JSON lines, whole or not at all (a temporary name,
    then a rename); the demos' sample files are written by this one writer."""
    out = Path(out_dir)
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
