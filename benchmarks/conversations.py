"""A generated long-conversation corpus with turn-level evidence.

Modelled on the public long-conversation benchmarks (pairs of people
talking over many sessions; questions about what one of them did, with
the turns that answer them marked). Every turn is one document whose
entity is its speaker, as an agent would remember a chat. What makes it
hard for lexical search is what makes the real ones hard:

- the partner answers an event by name ("That's great, Caroline! ...") and
  often did the same kind of thing themselves, so the question's words
  and the person's name are all over turns that are not the answer;
- a question says some things in other words than the turn did (a
  "ceramics workshop" for a "pottery class"), which only meaning finds;
- most turns are small talk sharing the common words.

Each question names its person by full name and asks about one of their
events (when, what, where); its evidence is the turn where they told it.
Deterministic for a seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

FIRST = [
    "Caroline",
    "Melanie",
    "Jon",
    "Gina",
    "Maria",
    "John",
    "Audrey",
    "Andrew",
    "James",
    "Joanna",
    "Nate",
    "Tim",
    "Evan",
    "Sam",
    "Calvin",
    "Dave",
    "Deborah",
    "Jolene",
    "Lena",
    "Omar",
    "Priya",
    "Ravi",
    "Sofia",
    "Tomas",
    "Yuki",
    "Hana",
    "Leo",
    "Mira",
    "Noah",
    "Iris",
    "Felix",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Lars",
    "Maya",
    "Nils",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Uma",
    "Victor",
    "Wanda",
    "Xavier",
    "Yara",
    "Zane",
    "Amir",
    "Bea",
    "Cyril",
    "Dora",
    "Emil",
    "Fiona",
    "Gabe",
    "Hilda",
    "Ivan",
    "Jade",
    "Karl",
    "Luna",
]
LAST = [
    "Webb",
    "Hart",
    "Cole",
    "Reyes",
    "Novak",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Tanaka",
    "Silva",
    "Brandt",
    "Kowalski",
    "Dubois",
    "Ferreira",
    "Haas",
    "Ivanova",
    "Jensen",
    "Kaur",
    "Larsen",
    "Mendes",
    "Nakamura",
    "Ortiz",
    "Petrov",
    "Quist",
    "Rossi",
    "Sato",
    "Takahashi",
    "Urban",
    "Vance",
    "Weiss",
    "Yilmaz",
    "Zhou",
    "Abbott",
    "Baker",
    "Carver",
    "Dalton",
    "Ellis",
    "Fischer",
    "Grant",
]

# (past tense, base form, object, the object in other words, place)
EVENTS = [
    ("went to", "go to", "a pottery class", "a ceramics workshop", "downtown"),
    ("adopted", "adopt", "a puppy from the shelter", "a young rescue dog", "at the shelter"),
    ("painted", "paint", "a sunset over the lake", "an evening landscape by the water", "at home"),
    ("ran", "run", "a charity marathon", "a long race for a good cause", "in the city"),
    ("joined", "join", "a support group", "a community circle for help", "at the center"),
    ("started", "start", "a vegetable garden", "growing tomatoes and greens", "in the backyard"),
    ("visited", "visit", "my grandmother", "an elderly relative", "in the countryside"),
    ("bought", "buy", "a used guitar", "a second-hand instrument", "at a flea market"),
    ("learned", "learn", "to bake sourdough bread", "making bread with a starter", "at home"),
    ("attended", "attend", "a jazz concert", "a live music night", "at the old theater"),
    ("finished", "finish", "a mystery novel", "a detective book", "on the train"),
    ("hiked", "hike", "up the coastal trail", "along cliffs by the sea", "near the coast"),
    ("volunteered at", "volunteer at", "the food bank", "a place giving out meals", "nearby"),
    ("moved to", "move to", "a new apartment", "another flat", "across town"),
    ("signed up for", "sign up for", "a photography course", "lessons on taking pictures", ""),
    ("camped", "camp", "by the mountain lake", "next to water in the hills", "up north"),
    ("cooked", "cook", "a curry for my neighbors", "a spicy dinner for the people next door", ""),
    ("won", "win", "a chess tournament", "a board game competition", "at the library"),
    ("got", "get", "a promotion at work", "a better position at my job", "this spring"),
    ("celebrated", "celebrate", "my sister's wedding", "a family marriage", "by the river"),
    ("planted", "plant", "a cherry tree", "a fruit tree", "in the garden"),
    ("sang in", "sing in", "the community choir", "a local singing group", "at the church"),
    ("repaired", "repair", "an old bicycle", "a worn-out bike", "in the garage"),
    ("wrote", "write", "a letter to my younger self", "a note to me as a child", ""),
    ("toured", "tour", "the science museum", "an exhibition about physics", "in the capital"),
    ("knitted", "knit", "a scarf for my dad", "warm neckwear for my father", "last winter"),
    ("organized", "organize", "a neighborhood cleanup", "a day clearing litter on our street", ""),
    ("tried", "try", "rock climbing", "scaling walls at a gym", "at the climbing gym"),
    ("taught", "teach", "my son to swim", "my boy swimming", "at the pool"),
    ("recorded", "record", "a podcast episode", "an audio show", "in my room"),
    ("rescued", "rescue", "a stray kitten", "a lost little cat", "behind the store"),
    ("built", "build", "a bookshelf", "shelves for my books", "in the workshop"),
]
WHEN = [
    "last week",
    "yesterday",
    "on Saturday",
    "two days ago",
    "last month",
    "in May",
    "over the weekend",
    "this morning",
    "on my birthday",
    "during the holidays",
    "in June",
    "last summer",
    "a few weeks ago",
    "on Friday evening",
]
FEEL = [
    "It was amazing.",
    "I felt so proud.",
    "Honestly it was harder than I thought.",
    "It made me really happy.",
    "I can't wait to do it again.",
    "It was a bit scary at first.",
    "Everyone was so kind.",
    "It reminded me of my childhood.",
    "",
    "",
]
REACT = [
    "That's great",
    "Wow",
    "That sounds lovely",
    "I'm so happy for you",
    "No way",
    "That's wonderful",
    "Good for you",
    "Oh nice",
]
SMALL = [
    "How are the kids doing these days?",
    "Work has been really busy lately.",
    "Did you sleep well? I was up all night.",
    "The weather has been so strange this week.",
    "I have been thinking about what you said last time.",
    "Let's catch up again soon.",
    "Thanks for listening, it means a lot.",
    "I hope your week gets better.",
    "Are you still thinking about that trip?",
    "My phone died again, sorry for the late reply.",
    "I made coffee and I'm finally relaxing.",
    "Tell me more about how that went.",
]
ASK = {
    "when": "When did {who} {base} {obj}?",
    "what": "What did {who} {base} {when}?",
    "where": "Where did {who} {base} {obj}?",
}


@dataclass
class Question:
    text: str
    namespace: str
    evidence: set[str] = field(default_factory=set)  # document uris
    paraphrased: bool = False  # asks in other words than the turn said it
    category: str = "generated"  # the question's kind, as its corpus names it

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class Corpus:
    documents: list[dict]  # text, uri, entities
    questions: list[Question]


def generate(
    turns: int,
    questions: int,
    seed: int = 7,
    per_conversation: int = 600,
    *,
    one_namespace: bool = False,
) -> Corpus:
    """About ``turns`` turns in conversations of about ``per_conversation``,
    and up to ``questions`` questions spread over the conversations. Each
    conversation is a namespace of its own (as one memory per pair of
    people), or with ``one_namespace`` all share ``default``."""
    rng = random.Random(seed)
    people = [f"{f} {surname}" for surname in LAST for f in FIRST]
    rng.shuffle(people)
    documents: list[dict] = []
    events: list[tuple[str, str, tuple, str, str]] = []  # (who, uri, event, when, namespace)
    conv = 0
    while len(documents) < turns:
        a, b = people[(2 * conv) % len(people)], people[(2 * conv + 1) % len(people)]
        if conv * 2 >= len(people):  # reuse names with a conversation number
            a, b = f"{a} {conv}", f"{b} {conv}"
        size = min(
            turns - len(documents), rng.randint(per_conversation // 2, per_conversation * 3 // 2)
        )
        speaker = a
        for t in range(size):
            other = b if speaker == a else a
            uri = f"conv{conv}/turn{t}"
            roll = rng.random()
            if roll < 0.22:
                event = rng.choice(EVENTS)
                when = rng.choice(WHEN)
                place = f" {event[4]}" if event[4] and rng.random() < 0.5 else ""
                body = f"Guess what! I {event[0]} {event[2]}{place} {when}. {rng.choice(FEEL)}"
                events.append(
                    (speaker, uri, event, when, "default" if one_namespace else f"conv{conv}")
                )
            elif roll < 0.42 and events and events[-1][0] == other:
                # the partner reacts by name, often with the same kind of thing
                event = events[-1][2]
                first = other.split()[0]
                if rng.random() < 0.5:
                    same = f"I {event[0]} {event[2]} once, {rng.choice(WHEN)}."
                else:
                    same = f"I never {event[1]} {event[3]}."
                body = f"{rng.choice(REACT)}, {first}! {same} {rng.choice(SMALL)}"
            else:
                body = rng.choice(SMALL)
                if rng.random() < 0.3:
                    body = f"{other.split()[0]}, {body[0].lower()}{body[1:]}"
            ns = "default" if one_namespace else f"conv{conv}"
            documents.append(
                {"text": body.strip(), "uri": uri, "entities": [speaker], "namespace": ns}
            )
            speaker = other if rng.random() < 0.8 else speaker
        conv += 1
    made: list[Question] = []
    for who, uri, event, when, ns in rng.sample(events, min(questions, len(events))):
        form = rng.choice(list(ASK))
        obj = event[3] if rng.random() < 0.3 else event[2]  # some asked in other words
        text = ASK[form].format(who=who, base=event[1], obj=obj, when=when)
        other = obj == event[3] and "{obj}" in ASK[form]
        made.append(Question(text.replace("  ", " "), ns, {uri}, other))
    return Corpus(documents, made)


#: LoCoMo's question categories by their number in the data (the
#: repository's convention; the paper's five kinds).
LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
#: How a harness may remember a LoCoMo turn: its text prefixed with the
#: speaker's name ("prefix"), the speaker named as its entity ("entity"),
#: both, or neither ("bare").
LOCOMO_SHAPES = ("entity", "prefix", "prefix+entity", "bare")


def locomo(path: str, shape: str = "entity") -> tuple[Corpus, int]:
    """The public LoCoMo file (``data/locomo10.json`` of snap-research/LoCoMo,
    or a subset in its format) as a corpus: one document per dialogue turn,
    in a namespace per conversation, its uri ``locomo://SAMPLE/D1:3``, its
    session's date in its metadata; questions with their evidence turns and
    category. Also how many questions were left out because none of their
    evidence ids names a turn (a few are malformed in the public file:
    ``D:11:26`` is read as ``D11:26``, ``D8:6; D9:17`` as two)."""
    import json
    import re

    if shape not in LOCOMO_SHAPES:
        raise SystemExit(f"unknown shape {shape!r}: use one of {', '.join(LOCOMO_SHAPES)}")
    try:
        with open(path, encoding="utf-8") as f:
            samples = json.load(f)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: cannot read it as LoCoMo's JSON: {exc}") from None
    documents: list[dict] = []
    questions: list[Question] = []
    skipped = 0
    for sample in samples:
        ns, talk = sample["sample_id"], sample["conversation"]
        turns: set[str] = set()
        for key, session in talk.items():
            if not key.startswith("session_") or key.endswith("date_time"):
                continue
            date = talk.get(f"{key}_date_time", "")
            for turn in session:
                body = turn["text"]
                if "prefix" in shape:
                    body = f"{turn['speaker']}: {body}"
                doc = {
                    "text": body,
                    "uri": f"locomo://{ns}/{turn['dia_id']}",
                    "namespace": ns,
                    "metadata": {"session_date": date, "speaker": turn["speaker"]},
                }
                if "entity" in shape:
                    doc["entities"] = [turn["speaker"]]
                documents.append(doc)
                turns.add(turn["dia_id"])
        for qa in sample["qa"]:
            ids = {
                f"D{m[0]}:{m[1]}"
                for e in qa.get("evidence", [])
                for m in re.findall(r"D:?(\d+):(\d+)", e)
            }
            ids &= turns
            if not ids:
                skipped += 1
                continue
            kind = LOCOMO_CATEGORIES.get(qa["category"], str(qa["category"]))
            questions.append(
                Question(
                    qa["question"],
                    ns,
                    {f"locomo://{ns}/{i}" for i in ids},
                    category=f"{qa['category']} {kind}",
                )
            )
    return Corpus(documents, questions), skipped


def jsonl(path: str) -> Iterator[dict]:
    import json

    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise SystemExit(f"{path}:{n}: not JSON: {exc}") from None
