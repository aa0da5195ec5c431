#!/usr/bin/env python3
"""make_head_data.py: the small jsonl files the head objectives' end-to-end runs train on
(tests/fixtures/head, tests/train/run_head.sh heads): sentences with a sentiment label
(classification), words with number tags (token classification, the BIO scheme of CoNLL's
ner_tags), and SQuAD-shaped questions whose answer is a number in the context (question
answering). Python's standard library only, deterministic: python3 tools/make_head_data.py"""
import json
import os
import random

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "head")
GOOD = ["great", "lovely", "wonderful", "fine", "excellent", "pleasant"]
BAD = ["awful", "terrible", "dreadful", "poor", "horrible", "bleak"]
THINGS = ["movie", "meal", "trip", "book", "concert", "garden", "game", "hotel"]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana"]


def write(name, records):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    rng = random.Random(20261206)
    cls = []
    for i in range(48):
        pos = i % 2 == 0
        word = rng.choice(GOOD if pos else BAD)
        text = f"{rng.choice(NAMES)} said the {rng.choice(THINGS)} was {word}."
        cls.append({"text": text, "label": "positive" if pos else "negative"})
    write("classification.jsonl", cls)
    tok = []
    for i in range(48):
        words, tags = [], []
        for _ in range(rng.randint(4, 9)):
            if rng.random() < 0.3:
                n = str(rng.randint(1, 999))
                words += [n, "apples"] if rng.random() < 0.5 else [n]
                tags += ["B-NUM", "O"] if len(words) > len(tags) + 1 else ["B-NUM"]
            else:
                words.append(rng.choice(NAMES + THINGS + GOOD))
                tags.append("O")
        tok.append({"tokens": words, "ner_tags": tags})
    write("token_classification.jsonl", tok)
    qa = []
    for i in range(48):
        name, thing, n = rng.choice(NAMES), rng.choice(THINGS), rng.randint(2, 99)
        context = f"{name} went to the {thing} with {n} friends and stayed all day."
        at = context.index(f" {n} ") + 1
        qa.append({"question": f"How many friends went with {name}?", "context": context,
                   "answers": {"text": [str(n)], "answer_start": [at]}})
    write("qa.jsonl", qa)


if __name__ == "__main__":
    main()
