"""The generated corpus of ``benchmarks/grounding.py``: entities, their source
passages and facts, faithful pages written from them, and corrupted pages.

Everything is drawn from ``random.Random`` seeded per entity, so a seed gives
the same corpus on every machine. Nothing here reads the checks' rules: a
page is built the way a writer would build it, and a corruption is applied
the way a careless one would make it.

*Statements.* A source sentence is the rendering of a statement: a family
(``pet``, ``outage``, ``ceo``…), a subject and slot values (people, products,
places, organisations, pets, numbers, money, percentages, years, months,
days of a month, weekdays, clock times, ISO dates, relative times,
durations, plain words). Each family has narrative templates, first-person
templates for dialogue turns (``Speaker: text``) and paraphrase templates.
A rendered sentence keeps its slot values as segments, so a paraphrase can
write a value in another form (``12`` as ``twelve``, ``8 May`` as ``May 8``,
``13:56`` as ``1:56 pm``) and a corruption can change exactly one value.

*Passages* are narrative notes (one or two statements), dialogue turns (a
speaker's label, sometimes an interjection, a statement), a session header
(``Conversation between A and B at 1:56 pm on 8 May, 2023.``) and turns
that are interjections only. About a third of an entity's passages are
*distractors*: another session with the same people, which pages never draw
on (as the study took the next session's turns).

*Pages* (:func:`faithful_pages`): verbatim (statement sentences copied),
paraphrased (another template, synonyms from a table, function words
dropped, two or three statements merged into one sentence, values in other
forms) and observation lines (``- Mel adopted a dog in May 2023 [4]``),
each with and without citation markers, all stating the entity's facts.
*Corruptions* (:func:`corrupt`): one sentence of a faithful page changed in
one of eight ways (:data:`CLASSES`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple


def _list(text: str) -> list[str]:
    """A word list written as text (``|`` joins the words of one name)."""
    return [w.replace("|", " ") for w in text.split()]


MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
]  # fmt: skip
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

FIRST_NAMES = _list(
    """
Melanie Caroline Priya Jonas Tomas Aiko Kwame Olga Mateo Lucia Noah Emma Liam Chloe Ravi
Ines Yusuf Leila Sven Freya Dmitri Hana Omar Zara Felix Greta Marco Nadia Pedro Rosa Samir
Tessa Viktor Wen Xavier Yara Zoltan Amara Bruno Celine Dario Elif Farid Gael Hugo Ingrid
Jamal Kaito Lena Milo Nora Oscar Paloma Quentin Rania Soren Talia Uma Vera Wanda Yosef
Zainab Aurelio Beatriz Cosmin Dalia Emeka Fiona Gideon Halima Ivo Jasper Keiko Lorenzo
Mirela Nikhil Orla Pavel Rhea Stellan Thandiwe Ulrich Valentina Wiremu Ximena Yannick
Zeynep Anika Boris Carmen Desmond Esther Fabian Gwen Hamid Isolde Joaquin Katya Leon
Maribel Nils Ottilie Piotr Rafael Selma Teodor Ursula Vikram Winona Yvette Alastair
Bettina Cyrus Delphine Elias Florian Grace Henrik Ilse Jovana Kasimir Lorna Matthias
Nerea Oriana Philippa Rosalind Sebastian Theodora Alexander Benedict Cornelius Dominika
Evangeline Frederica Genevieve Harriet Imogen Jonathan Katarina Leopold Magdalena
"""
)
LAST_NAMES = _list(
    """
Ortiz Ruiz Shah Berg Novak Tanaka Mensah Ivanova Rossi Silva Carter Dubois Kowalski
Haddad Lindqvist Okafor Moreau Petrov Yamamoto Farouk Jensen Costa Nakamura Alvarez Weber
Fischer Santos Kaur Murphy Horvath Nguyen Sato Kim Larsen Eriksen Quispe Mwangi Abara
Brennan Castillo Duarte Ekstrom Fontaine Galloway Hartmann Iqbal Janssen Kovac Laurent
Marchetti Nowak Olsen Pereira Quinn Rahman Schultz Torres Ueda Vargas Whitfield Yilmaz
Zielinski Achebe Bianchi Chaudhry Delgado Esposito Ferreira Gallagher Holm Ibarra Jovanovic
"""
)
PRODUCTS = _list(
    """
Kindle Spotify Figma Duolingo Peloton Garmin Fitbit Roomba PlayStation Xbox Trello Jira
Grafana Kafka Redis PostgreSQL Terraform Kubernetes Ansible Prometheus Elasticsearch
RabbitMQ Cassandra Nginx Jenkins GitLab Datadog Sentry Airflow Snowflake Tableau Docker
Vagrant Consul Istio Envoy Zabbix Splunk Strava Audible Netflix Etsy Airbnb DoorDash
Instacart Shopify Squarespace WordPress Canva Procreate Ableton Fender Yamaha Casio
Moleskine Patagonia Nespresso Dyson Vitamix Polaroid Nikon Lego Vespa Obsidian Notion Slack
Zoom Miro Asana Clickhouse MongoDB Memcached Traefik Keycloak Pulsar Flink Spark Hadoop
"""
)
PLACES = _list(
    """
Porto Lisbon Oslo Denver Kyoto Nairobi Valparaiso Tbilisi Ljubljana Reykjavik Montreal
Seattle Austin Boise Tucson Halifax Bergen Krakow Gdansk Brno Graz Lyon Nantes Bilbao
Seville Palermo Bologna Turin Zadar Izmir Haifa Accra Lagos Kampala Arusha Mombasa Durban
Perth Hobart Dunedin Queenstown Cusco Quito Medellin Oaxaca Havana Tallinn Riga Vilnius
Aarhus Uppsala Tampere Galway Cork Aberdeen Inverness Cardiff Bristol Leeds Antwerp Ghent
Utrecht Leiden Basel Lausanne Innsbruck Salzburg Dresden Leipzig Bremen Freiburg Toulouse
Marseille Valencia Malaga Granada Coimbra Braga Faro Heraklion Thessaloniki Plovdiv Varna
Sapporo Fukuoka Busan Hanoi Hue Penang Chiang|Mai Kandy Goa Pune Mysore
"""
)
PLACES += ["Lake Tahoe", "Lake Como", "Big Sur", "Cape Cod", "Mount Rainier", "San Diego"]
ORGS = _list(
    """
Brightwater|Labs Northwind|Traders Harbor|Books Juniper|Health Tidewater|Bank
Copperleaf|Studio Ironbark|Capital Bluefin|Analytics Redwood|Clinic Silverline|Transit
Foxglove|Press Granite|Robotics Marigold|Foods Halcyon|Energy Larkspur|Games
Pinecrest|School Driftwood|Media Quarry|Works Saltmarsh|Farms Ember|Insurance
Cinder|Logistics Wildrose|Bakery Oakhurst|Library Stonebridge|Partners Bramble|Design
Thistle|Software Kingfisher|Airlines Moorland|Wines Ashgrove|Hospital Riverbend|Theatre
"""
)
PETS = _list(
    """
Biscuit Luna Pepper Oreo Mochi Ziggy Nacho Tofu Waffles Pickle Noodle Clover Pretzel
Maple Sprout Bean Olive Gizmo Pixel Widget Rocket Comet Toffee Mango Kiwi Sushi Bagel
"""
)
SYSTEMS = _list(
    """
Kestrel Heron Osprey Lattice Quillon Marlin Basalt Cobalt Tundra Sable Falcon Merlin
Halyard Bramblecache Nightjar Ptarmigan Cormorant Wagtail Plover Gannet Shrike Bittern
Corvid Petrel Skua Tern Grebe Dunlin Curlew Avocet Siskin Linnet Redstart Whinchat
"""
)
PLACE_ENTITIES = _list(
    """
Orta Verzasca Formosa Skye Terre Lofoten Hallstatt Giethoorn Colmar Sintra Ronda Matera
Kotor Piran Rovinj Bled Mostar Bruges Annecy Tromso Alesund Eze Gordes Ravello Positano
Krumlov Telc Oia Nafplio Chefchaouen Essaouira Tavira Olhao Comillas Cadaques Menton
"""
)
PLACE_SUFFIXES = ["", " Valley", " Bay", " Harbour", " Island", " Springs", " Heights"]
ORG_PARTS = _list(
    """
Alderbrook Bellweather Cobblestone Dovetail Everglow Fernhill Goldcrest Hollowell Inkwell
Jadeleaf Kettlewell Lanternfish Meadowlark Nettlefield Orchardly Paperbark Quillfeather
Ravenstone Sandpiper Tinderbox Umberfield Vinecrest Wrenwood Yarrowby Zephyrine
"""
)
ORG_SUFFIXES = ["Labs", "Trust", "Systems", "Media", "Foods", "Bank", "Press", "Studio", "Capital"]
SYSTEM_SUFFIXES = ["", " API", " Queue", " Store", " Gateway", " Index", " Scheduler"]

ANIMALS = ["dog", "cat", "rabbit", "parrot", "puppy", "kitten", "tortoise", "hamster"]
JOBS = ["nurse", "teacher", "pharmacist", "architect", "librarian", "designer", "barista", "chef"]
TOPICS = ["astronomy", "gardening", "history", "cooking", "chess", "sailing", "birds", "poetry"]
SKILLS = ["paint", "swim", "code", "knit", "skate", "bake", "climb", "sew"]
INSTRUMENTS = ["violin", "drums", "cello", "guitar", "piano", "saxophone", "trumpet", "flute"]
EVENTS = ["pottery class", "book club", "charity run", "cooking course", "yoga retreat"]
PROJECTS = ["thesis", "novel", "quilt", "garden shed", "kitchen remodel", "photo album"]
DATA = ["logs", "metrics", "traces", "events", "audit records", "snapshots"]
FESTIVALS = ["jazz", "film", "lantern", "harvest", "kite", "folk music", "street food"]
CUISINES = ["ramen", "seafood", "vegan", "tapas", "dumpling", "pizza", "bistro"]
QUARTERS = ["second", "third", "fourth"]
JOB_VALUES = ["nurse", "teacher", "architect", "pharmacist", "surveyor", "translator"]
TEAMS = ["payments", "search", "platform", "billing", "identity", "storage"]

FILLERS = [
    "That sounds amazing!", "Wow, good for you.", "Haha, I remember that.",
    "Oh no, sorry to hear that.", "Thanks, looking into it now.", "Let me check and get back to you.",
    "Nice, that is really cool.", "How did it go?", "What happened after that?", "Ack, on it.",
    "I love that idea.", "Keep me posted.", "That makes sense to me.", "Good catch, thanks.",
    "Honestly I had no idea.", "Fair enough.", "Can you share the details?", "Sounds good.",
]  # fmt: skip

#: Literal words a paraphrase may swap (applied to template text, never to a value).
SYNONYMS = {
    "adopted": ["took in"], "named": ["called"], "called": ["named"], "ran": ["jogged"],
    "started": ["began"],
    "began": ["started"], "travelled": ["went"], "read": ["got through"],
    "finished": ["completed"], "completed": ["finished"], "teaches": ["coaches"],
    "kids": ["children"], "children": ["kids"], "bought": ["purchased"], "paid": ["spent"],
    "moved": ["relocated"], "relocated": ["moved"], "cafe": ["coffee shop"], "volunteered": ["worked"], "party": ["celebration"],
    "taught": ["showed"], "stores": ["keeps"], "keeps": ["stores"],
    "migrated": ["moved"], "deployed": ["shipped"], "shipped": ["rolled out"],
    "fell": ["dropped"], "dropped": ["fell"], "handed": ["passed"], "costs": ["comes to"],
    "released": ["published"], "processes": ["handles"], "handles": ["processes"],
    "presented": ["showed"], "served": ["delivered"], "hired": ["recruited"],
    "opened": ["set up"], "launched": ["introduced"], "made": ["earned"], "earned": ["made"],
    "signed": ["struck"], "grew": ["expanded"], "expanded": ["grew"], "drew": ["attracted"],
    "welcomed": ["received"], "visitors": ["tourists"], "tourists": ["visitors"],
    "hiked": ["walked"], "walked": ["hiked"], "founded": ["established"],
    "engineers": ["developers"], "employees": ["staff"], "people": ["staff"],
    "deal": ["contract"], "restaurant": ["eatery"], "outage": ["incident"],
    "design": ["architecture"], "roadmap": ["plan"], "drives": ["commutes"],
    "lessons": ["classes"], "new": ["brand-new"], "region": ["area"], "incidents": ["outages"],
    "replicas": ["copies"], "jobs": ["tasks"], "ticket": ["fare"], "kilometres": ["km"],
    "employs": ["has"], "learned": ["picked up how"],
}  # fmt: skip
#: Function words a paraphrase (and more often an observation line) may drop.
DROPPABLE = {"the", "a", "an", "that", "really", "just", "also", "then", "new"}

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """``25`` -> ``twenty-five``, ``3200`` -> ``three thousand two hundred``."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        t, o = divmod(n, 10)
        return _TENS[t] + ("-" + _ONES[o] if o else "")
    if n < 1000:
        h, r = divmod(n, 100)
        return _ONES[h] + " hundred" + (" " + number_words(r) if r else "")
    th, r = divmod(n, 1000)
    return number_words(th) + " thousand" + (" " + number_words(r) if r else "")


def wordable(n: int) -> bool:
    """Would a writer spell ``n`` out?"""
    return n <= 20 or (n < 100 and n % 10 == 0) or (n < 1000 and n % 100 == 0) or n % 1000 == 0


def _ordinal(d: int) -> str:
    suffix = "th" if 10 <= d % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    return f"{d}{suffix}"


# --- values ------------------------------------------------------------------------------

#: What a corruption class changes, by value type.
NUMBER_TYPES = {"num", "money", "pct", "dur"}
DATE_TYPES = {"year", "my", "dm", "wd", "clock", "iso"}
TIME_TYPES = {"rel", "dur"}


@dataclass(frozen=True)
class Val:
    """A slot value: its ``type``, its ``data`` and the ``style`` it is written in.

    Names (``type == "name"``) carry ``kind`` (person, product, place, org,
    pet, system) and ``data = (full, first, short)``; ``style`` says which
    form is written.
    """

    type: str
    data: tuple
    style: str = ""
    kind: str = ""
    unit: str = ""  # what a number counts ("miles"), for dur the time unit

    def text(self) -> str:
        t, d, s = self.type, self.data, self.style
        if t == "name":
            full, first, short = d
            return {"first": first or full, "short": short or first or full}.get(s, full)
        if t == "word":
            return d[0]
        if t == "num":
            n = d[0]
            if s == "words":
                return number_words(n)
            return f"{n:,}" if s == "commas" else str(n)
        if t == "money":
            return f"{d[0]} dollars" if s == "dollars" else f"${d[0]:,}"
        if t == "pct":
            return f"{d[0]} percent" if s == "percent" else f"{d[0]}%"
        if t == "year":
            return str(d[0])
        if t == "my":
            m, y = d
            return f"{MONTHS[m - 1]} of {y}" if s == "mofy" else f"{MONTHS[m - 1]} {y}"
        if t == "dm":
            day, m = d
            month = MONTHS[m - 1]
            return {
                "md": f"{month} {day}",
                "dth": f"{_ordinal(day)} of {month}",
                "mdth": f"{month} {_ordinal(day)}",
            }.get(s, f"{day} {month}")
        if t == "wd":
            return WEEKDAYS[d[0]]
        if t == "clock":
            h, m = d
            h12 = h % 12 or 12
            ampm = "am" if h < 12 else "pm"
            if s == "24":
                return f"{h:02d}:{m:02d}"
            if s == "h" and m == 0:
                return f"{h12} {ampm}"
            return f"{h12}:{m:02d}{'' if s == 'tight' else ' '}{ampm}"
        if t == "iso":
            y, m, day = d
            if s == "dmy":
                return f"{day} {MONTHS[m - 1]} {y}"
            if s == "mdy":
                return f"{MONTHS[m - 1]} {day}, {y}"
            return f"{y:04d}-{m:02d}-{day:02d}"
        if t == "rel":
            form, unit, n = d
            if form == "day":
                return unit
            if form == "ago_n":
                num = number_words(n) if s == "words" else str(n)
                return f"{num} {unit}s ago"
            if form == "ago_a":
                return f"a {unit} ago"
            if form == "few_ago":
                return f"several {unit}s ago" if s == "several" else f"a few {unit}s ago"
            if form == "this":
                return f"this {unit}"
            if form == "next":
                return {"coming": "the coming", "following": "the following"}.get(s, "next") + (
                    f" {unit}"
                )
            return {"previous": "the previous", "past": "the past"}.get(s, "last") + f" {unit}"
        if t == "dur":
            n = d[0]
            num = number_words(n) if s == "words" else str(n)
            return f"{num} {self.unit}{'' if n == 1 else 's'}"
        raise ValueError(t)  # pragma: no cover

    def styles(self) -> list[str]:
        """The forms a paraphrase may write this value in (its own included)."""
        t = self.type
        if t == "name":
            _full, first, short = self.data
            return ["full"] + (["first"] if first else []) + (["short"] if short else [])
        if t == "num":
            if self.style == "digits_only":
                return ["digits_only"]
            out = ["digits"] + (["words"] if wordable(self.data[0]) else [])
            return out + (["commas"] if self.data[0] >= 1000 else [])
        if t == "money":
            return ["$"] if self.style == "$only" else ["$", "dollars"]
        if t == "pct":
            return ["%", "percent"]
        if t == "my":
            return ["my", "mofy"]
        if t == "dm":
            return ["dm", "md", "dth", "mdth"]
        if t == "clock":
            return ["12", "24", "tight"] + (["h"] if self.data[1] == 0 else [])
        if t == "iso":
            return ["iso", "dmy", "mdy"]
        if t == "rel":
            form = self.data[0]
            return {
                "ago_n": ["words", "digits"],
                "last": ["last", "previous", "past"],
                "next": ["next", "coming", "following"],
                "few_ago": ["few", "several"],
            }.get(form, [self.style])
        if t == "dur":
            return ["digits", "words"] if wordable(self.data[0]) else ["digits"]
        return [self.style]

    def restyled(self, style: str) -> Val:
        return Val(self.type, self.data, style, self.kind, self.unit)


def name_val(kind: str, full: str, first: str | None = None, short: str | None = None) -> Val:
    return Val("name", (full, first, short), "full", kind)


# --- corrupting one value ----------------------------------------------------------------


def _other(rng: random.Random, current: int, choices: list[int]) -> int:
    pool = [c for c in choices if c != current]
    return rng.choice(pool)


def changed_number(v: Val, rng: random.Random) -> Val:
    """The same value type and style with another number (what a slip of the
    pen or a misread source gives: off by a little, doubled, halved)."""
    n = v.data[0]
    candidates = {n + 1, n - 1, n + 2, n * 2, max(1, n // 2), n + 10, n + rng.randint(3, 9)}
    if n >= 100:
        candidates |= {n + 100, n - 100, round(n * 1.5)}
    candidates = {c for c in candidates if c > 0 and c != n}
    style = v.style
    if style == "words" or (v.type in ("dur", "rel") and style == "words"):
        worded = sorted(c for c in candidates if wordable(c))
        if worded:
            candidates = set(worded)
        else:
            style = "digits"
    new = rng.choice(sorted(candidates))
    if v.type == "rel":
        form, unit, _ = v.data
        return Val("rel", (form, unit, new), style, v.kind, v.unit)
    return Val(v.type, (new, *v.data[1:]), style, v.kind, v.unit)


def changed_date(v: Val, rng: random.Random) -> Val:
    t, d = v.type, v.data
    if t == "year":
        return Val(t, (d[0] + rng.choice([-3, -2, -1, 1, 2, 3]),), v.style)
    if t == "my":
        m, y = d
        if rng.random() < 0.5:
            return Val(t, (_other(rng, m, list(range(1, 13))), y), v.style)
        return Val(t, (m, y + rng.choice([-2, -1, 1, 2])), v.style)
    if t == "dm":
        day, m = d
        if rng.random() < 0.6:
            return Val(t, (_other(rng, day, list(range(1, 29))), m), v.style)
        return Val(t, (day, _other(rng, m, list(range(1, 13)))), v.style)
    if t == "wd":
        return Val(t, (_other(rng, d[0], list(range(7))),), v.style)
    if t == "clock":
        h, m = d
        if m and rng.random() < 0.4:
            return Val(t, (h, _other(rng, m, list(range(5, 60, 5)))), v.style)
        # another hour on the clock face (13:00 and 1 pm are the same hour)
        hours = [x for x in range(24) if x % 12 != h % 12 and (x < 12) == (h < 12)]
        return Val(t, (rng.choice(hours), m), v.style)
    if t == "iso":
        y, m, day = d
        r = rng.random()
        if r < 0.5:
            return Val(t, (y, m, _other(rng, day, list(range(1, 29)))), v.style)
        if r < 0.8:
            return Val(t, (y, _other(rng, m, list(range(1, 13))), day), v.style)
        return Val(t, (y + rng.choice([-1, 1]), m, day), v.style)
    raise ValueError(t)  # pragma: no cover


_UNIT_CHOICES = ["day", "week", "month", "year"]
_DAY_WORDS = ["yesterday", "today", "tomorrow", "tonight"]


def changed_unit(v: Val, rng: random.Random) -> Val:
    """A relative time (or a duration) with another unit: ``last week`` ->
    ``last month``, ``yesterday`` -> ``tomorrow``, ``three days`` -> ``three weeks``."""
    if v.type == "dur":
        units = [u for u in _UNIT_CHOICES if u != v.unit]
        return Val("dur", v.data, v.style, v.kind, rng.choice(units))
    form, unit, n = v.data
    if form == "day":
        return Val("rel", (form, rng.choice([w for w in _DAY_WORDS if w != unit]), n), v.style)
    units = _UNIT_CHOICES + (["weekend"] if form in ("last", "this", "next") else [])
    if form in ("last", "this", "next"):
        units.remove("day")  # "last day" is not said
    return Val("rel", (form, rng.choice([u for u in units if u != unit]), n), v.style)


# --- families of statements --------------------------------------------------------------


class Family(NamedTuple):
    """A kind of statement. ``src`` are its narrative templates (``{S}`` the
    subject); ``say[i]``, when given, is ``src[i]`` as the subject says it in
    a dialogue turn (first person). A paraphrase starts from the narrative
    template (:func:`paraphrase`)."""

    name: str
    subject: str  # person, system, place, org: what {S} is
    slots: dict[str, tuple]
    src: tuple[str, ...]
    say: tuple[str, ...]
    roles: bool = False  # its two people play different parts (swapping them changes it)


def F(name, subject, slots, src, say=(), roles=False) -> Family:
    return Family(name, subject, slots, tuple(src), tuple(say), roles)


P, Q = ("person",), ("person",)
PROD, PLACE, ORG, PET = ("product",), ("place",), ("org",), ("pet",)
YEAR, MY, DM, WD, CLK, ISO = ("year",), ("my",), ("dm",), ("wd",), ("clock",), ("iso",)


def N(lo, hi, styles=("digits", "words", "commas"), unit=""):
    return ("num", lo, hi, styles, unit)


def REL(*units):
    return ("rel", units)


def DUR(lo, hi, units):
    return ("dur", lo, hi, units)


def W(choices):
    return ("word", choices)


def MONEY(lo, hi, styles=("$", "dollars")):
    return ("money", lo, hi, styles)


PCT = ("pct", 5, 95)

FAMILIES: list[Family] = [
    # --- about people (a person entity and the people around it) ---
    F("pet", "person", {"PET": PET, "animal": W(ANIMALS), "MY": MY},
      ["{S} adopted a {animal} named {PET} in {MY}.", "{S} brought home a {animal} called {PET} in {MY}."],
      ["I adopted a {animal} named {PET} in {MY}!", "We brought home a {animal} called {PET} in {MY}."]),
    F("run", "person", {"N": N(3, 26, unit="miles"), "REL": REL("week", "weekend", "month"), "P": P},
      ["{S} ran {N} miles with {P} {REL}."],
      ["I ran {N} miles with {P} {REL}, my legs still hurt."]),
    F("concert", "person", {"P": P, "instrument": W(INSTRUMENTS), "PLACE": PLACE, "DM": DM},
      ["{S} watched {P} play {instrument} at a concert in {PLACE} on {DM}."],
      ["I watched {P} play {instrument} at a concert in {PLACE} on {DM}."], roles=True),
    F("gift", "person", {"P": P, "PROD": PROD, "DM": DM},
      ["{S} got a {PROD} from {P} as a birthday present on {DM}."],
      ["I got a {PROD} from {P} for my birthday on {DM}!"], roles=True),
    F("job", "person", {"ORG": ORG, "job": W(JOBS), "ISO": ISO},
      ["{S} started working at {ORG} as a {job} on {ISO}."],
      ["I started working at {ORG} as a {job} on {ISO}."]),
    F("trip", "person", {"PLACE": PLACE, "DUR": DUR(2, 6, ("day", "week")), "YEAR": YEAR, "P": P},
      ["{S} spent {DUR} in {PLACE} with {P} in {YEAR}."],
      ["I spent {DUR} in {PLACE} with {P} back in {YEAR}."]),
    F("books", "person", {"N": N(2, 15, unit="books"), "topic": W(TOPICS),
                          "REL": REL("week", "month", "year")},
      ["{S} read {N} books about {topic} {REL}."],
      ["I read {N} books about {topic} {REL}."]),
    F("teach", "person", {"N": N(4, 30, unit="kids"), "skill": W(SKILLS), "PLACE": PLACE, "WD": WD},
      ["{S} teaches {N} kids to {skill} at the {PLACE} community centre every {WD}."],
      ["I teach {N} kids to {skill} at the {PLACE} community centre every {WD}."]),
    F("spend", "person", {"MONEY": MONEY(20, 900), "PROD": PROD, "REL": REL("week", "month", "day")},
      ["{S} paid {MONEY} for a new {PROD} {REL}."],
      ["I paid {MONEY} for a new {PROD} {REL}, totally worth it."]),
    F("move", "person", {"PLACE": PLACE, "PLACE2": PLACE, "YEAR": YEAR,
                         "N": N(2, 12, unit="years")},
      ["{S} moved to {PLACE} after {N} years in {PLACE2} in {YEAR}."],
      ["I moved to {PLACE} after {N} years in {PLACE2} in {YEAR}."]),
    F("meet", "person", {"P": P, "PLACE": PLACE, "CLK": CLK, "WD": WD},
      ["{S} met {P} at a cafe in {PLACE} at {CLK} on {WD}."],
      ["I met {P} at a cafe in {PLACE} at {CLK} on {WD}."]),
    F("volunteer", "person", {"N": N(2, 40, unit="hours"), "ORG": ORG, "MY": MY},
      ["{S} volunteered {N} hours at the {ORG} food bank in {MY}."],
      ["I volunteered {N} hours at the {ORG} food bank in {MY}."]),
    F("missed", "person", {"P": P, "DM": DM},
      ["{S} did not go to the party {P} gave because of work on {DM}."],
      ["I didn't go to the party {P} gave because of work on {DM}."]),
    F("lesson", "person", {"P": P, "skill": W(SKILLS), "DUR": DUR(2, 9, ("week", "month"))},
      ["{S} learned to {skill} from {P} over {DUR}."],
      ["I learned to {skill} from {P} over {DUR}."], roles=True),
    F("percent", "person", {"PCT": PCT, "project": W(PROJECTS), "WD": WD},
      ["{S} finished {PCT} of the {project} by {WD}."],
      ["I finished {PCT} of my {project} by {WD}."]),
    F("event", "person", {"event": W(EVENTS), "ORG": ORG, "WD": WD, "CLK": CLK},
      ["{S} went to a {event} at {ORG} on {WD} at {CLK}."],
      ["I went to a {event} at {ORG} on {WD} at {CLK}."]),
    # --- about a system, and the engineers around it ---
    F("storage", "system", {"N": N(5, 900, ("digits",)), "data": W(DATA), "PLACE": PLACE},
      ["{S} stores {N} gigabytes of {data} in the {PLACE} region per day."]),
    F("migrate", "system", {"P": P, "PROD": PROD, "V": N(3, 17, ("digits_only",)), "ISO": ISO},
      ["{P} migrated {S} to {PROD} {V} on {ISO}."]),
    F("outage", "system", {"N": N(4, 180, ("digits", "words")), "WD": WD, "P": P,
                           "B": N(3000, 9999, ("digits_only",))},
      ["{S} was down for {N} minutes after {P} deployed build {B} on {WD}."]),
    F("latency", "system", {"N": N(120, 900, ("digits_only",)), "M": N(12, 110, ("digits_only",)),
                            "REL": REL("week", "month")},
      ["{S} cut its p99 latency from {N} ms to {M} ms {REL}."]),
    F("rollback", "system", {"P": P, "CLK": CLK, "DM": DM},
      ["{P} rolled {S} back at {CLK} on {DM}."]),
    F("replicas", "system", {"N": N(2, 9, ("digits", "words")), "PLACE": PLACE,
                             "M": N(2, 9, ("digits", "words")), "PLACE2": PLACE},
      ["{S} runs {N} replicas in {PLACE} and {M} in {PLACE2}."]),
    F("handoff", "system", {"P": P, "Q": Q, "MY": MY},
      ["{P} handed ownership of {S} to {Q} in {MY}."], roles=True),
    F("cost", "system", {"MONEY": MONEY(200, 9000), "PROD": PROD},
      ["{S} costs {MONEY} a month to run on {PROD}."]),
    F("release", "system", {"YEAR": YEAR, "ORG": ORG},
      ["{S} was first released by {ORG} in {YEAR}."]),
    F("incidents", "system", {"N": N(2, 14, ("digits", "words")), "REL": REL("week", "month", "year")},
      ["{S} had {N} incidents {REL}."]),
    F("nouse", "system", {"PROD": PROD, "MY": MY},
      ["{S} has not used {PROD} for caching since {MY}."]),
    F("review", "system", {"P": P, "Q": Q, "WD": WD, "CLK": CLK},
      ["{P} presented the {S} design to {Q} on {WD} at {CLK}."], roles=True),
    F("throughput", "system", {"N": N(200, 9000, ("digits", "commas")), "PROD": PROD},
      ["{S} processes {N} jobs per minute from {PROD}."]),
    F("traffic", "system", {"PCT": PCT, "PLACE": PLACE},
      ["{S} serves {PCT} of its traffic from {PLACE}."]),
    F("oncall", "system", {"P": P, "REL": REL("week", "weekend", "month"),
                           "N": N(3, 30, ("digits", "words"))},
      ["{P} was on call for {S} and got paged {N} times {REL}."]),
    # --- about a place ---
    F("visitors", "place", {"N": N(1200, 95000, ("digits", "commas")), "MY": MY},
      ["{S} drew {N} visitors in {MY}."]),
    F("festival", "place", {"festival": W(FESTIVALS), "DM": DM, "CLK": CLK},
      ["{S} opens its {festival} festival on {DM} at {CLK}."]),
    F("distance", "place", {"N": N(5, 400, ("digits", "words")), "PLACE": PLACE},
      ["{S} is {N} kilometres by road from {PLACE}."]),
    F("hike", "place", {"P": P, "PLACE": PLACE, "N": N(2, 11, ("digits", "words")), "WD": WD},
      ["{P} hiked from {S} to {PLACE} in {N} hours on {WD}."]),
    F("founded", "place", {"YEAR": ("year_old",), "P": P},
      ["{S} was founded by {P} in {YEAR}."]),
    F("ferry", "place", {"MONEY": MONEY(5, 80), "REL": REL("month", "year")},
      ["A ferry ticket to {S} went up to {MONEY} {REL}."]),
    F("snow", "place", {"N": N(5, 120, ("digits", "words")), "REL": REL("week", "weekend", "day")},
      ["{S} got {N} centimetres of snow {REL}."]),
    F("restaurant", "place", {"P": P, "cuisine": W(CUISINES), "ISO": ISO},
      ["{P} opened a {cuisine} restaurant in {S} on {ISO}."]),
    F("notrain", "place", {"P": P, "PLACE": PLACE},
      ["{S} has no train station, so {P} drives in from {PLACE}."]),
    F("guide", "place", {"P": P, "Q": Q, "DM": DM},
      ["{P} showed {Q} around {S} on {DM}."], roles=True),
    F("meet_place", "place", {"P": P, "Q": Q, "CLK": CLK, "WD": WD},
      ["{P} met {Q} in {S} at {CLK} on {WD}."]),
    # --- about an organisation ---
    F("hiring", "org", {"N": N(3, 250, ("digits", "words")), "YEAR": YEAR},
      ["{S} hired {N} engineers in {YEAR}."]),
    F("office", "org", {"PLACE": PLACE, "DM": DM},
      ["{S} opened an office in {PLACE} on {DM}."]),
    F("ceo", "org", {"P": P, "Q": Q, "MY": MY},
      ["{P} became chief executive of {S}, replacing {Q}, in {MY}."], roles=True),
    F("revenue", "org", {"MONEY": MONEY(2, 90, ("$only",)), "YEAR": YEAR},
      ["{S} made {MONEY} million in revenue in {YEAR}."]),
    F("launch", "org", {"PROD": PROD, "WD": WD, "DM": DM},
      ["{S} launched {PROD} on {WD}, {DM}."]),
    F("deal", "org", {"ORG": ORG, "MONEY": MONEY(1000, 90000, ("$only",)),
                      "REL": REL("week", "month", "year")},
      ["{S} signed a deal worth {MONEY} with {ORG} {REL}."]),
    F("nolayoffs", "org", {"YEAR": YEAR, "P": P},
      ["{S} did not lay off anyone, according to {P}, in {YEAR}."]),
    F("roadmap", "org", {"P": P, "Q": Q, "CLK": CLK, "ISO": ISO},
      ["{P} presented the {S} roadmap to {Q} at {CLK} on {ISO}."], roles=True),
    F("growth", "org", {"PCT": PCT, "YEAR": YEAR, "quarter": W(QUARTERS)},
      ["{S} grew {PCT} in the {quarter} quarter of {YEAR}."]),
    F("staff", "org", {"N": N(20, 900, ("digits", "words")), "PLACE": PLACE},
      ["{S} employs {N} people in {PLACE}."]),
]  # fmt: skip

#: A session's header, per entity type: {A} and {B} are the session's people.
HEADERS: dict[str, Family] = {
    "person": F("session", "person", {"A": P, "B": P, "CLK": CLK, "DM": DM, "YEAR": YEAR},
                ["Conversation between {A} and {B} at {CLK} on {DM}, {YEAR}."]),
    "system": F("session", "system", {"A": P, "B": P, "CLK": CLK, "ISO": ISO},
                ["Incident review of {S} with {A} and {B} on {ISO} at {CLK}."]),
    "place": F("session", "place", {"A": P, "B": P, "CLK": CLK, "DM": DM, "YEAR": YEAR},
               ["Travel chat between {A} and {B} about {S} at {CLK} on {DM}, {YEAR}."]),
    "org": F("session", "org", {"A": P, "B": P, "CLK": CLK, "ISO": ISO},
             ["Board meeting of {S}, chaired by {A} with {B} taking notes, on {ISO} at {CLK}."]),
}  # fmt: skip
FACTS: dict[str, list[tuple[str, str]]] = {
    "person": [("home city", "place"), ("employer", "org"), ("job title", "job")],
    "system": [("owner team", "team"), ("primary database", "product"), ("deploy region", "place")],
    "place": [("mayor", "person"), ("twin town", "place"), ("population", "number")],
    "org": [("headquarters", "place"), ("chief financial officer", "person"), ("headcount", "number")],
}  # fmt: skip

_SLOT = re.compile(r"\{(\w+)\}")


def _check_families() -> None:
    for fam in [*FAMILIES, *HEADERS.values()]:
        want = set(fam.slots) | {"S"}
        header_no_s = fam.name == "session" and fam.subject == "person"
        for t in fam.src:
            got = set(_SLOT.findall(t))
            assert got == want - ({"S"} if header_no_s else set()), (fam.name, t, got)
        assert not fam.say or len(fam.say) == len(fam.src), fam.name
        for t in fam.say:
            assert set(_SLOT.findall(t)) == want - {"S"}, (fam.name, t)


_check_families()


# --- rendered text ----------------------------------------------------------------------


class Seg(NamedTuple):
    """A piece of a sentence: literal text, or a value (``val``) with ``slot``
    its name in the statement (``S`` the subject, ``@`` a speaker's label)."""

    text: str
    val: Val | None = None
    slot: str = ""


Line = list  # of Seg


def line_text(line: Line) -> str:
    return "".join(s.text for s in line)


@dataclass
class Statement:
    family: Family
    values: dict[str, Val]  # S and the family's slots
    speaker: Val | None = None  # who said it (a dialogue turn)
    template: int = 0  # which of the family's templates the source used

    @property
    def narrative(self) -> str:
        """The source's template in the third person (a paraphrase starts from it)."""
        return self.family.src[self.template]

    def people(self) -> list[Val]:
        return [v for v in self.values.values() if v.type == "name" and v.kind == "person"]


@dataclass
class Passage:
    text: str
    sentences: list[tuple[Line, Statement | None]]  # statement None: an interjection
    label: Val | None = None  # the speaker, for a dialogue turn
    distractor: bool = False
    ref: int = 0  # the payload's ref, once stored
    address: str = ""

    def names(self) -> list[Val]:
        out = [self.label] if self.label else []
        for line, _ in self.sentences:
            out += [s.val for s in line if s.val and s.val.type == "name"]
        return out


@dataclass
class Entity:
    name: str
    type: str  # person, system, place, org
    subject: Val
    cast: list[Val]
    documents: list[dict[str, Any]] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    timing: bool = False

    def mentioned(self) -> set[str]:
        """Every word of the entity's sources and facts, casefolded: what
        "outside the sources" is checked against."""
        text = " ".join(p.text for p in self.passages)
        text += " " + " ".join(f"{f['predicate']} {f['value']}" for f in self.facts)
        text += " " + self.name
        return {w.lower() for w in re.findall(r"[^\W_]+", text)}


def _fill(template: str, values: dict[str, Val], styles: dict[str, str] | None = None) -> Line:
    """A template with its slots filled: literal segments and value segments."""
    out: Line = []
    pos = 0
    for m in _SLOT.finditer(template):
        if m.start() > pos:
            out.append(Seg(template[pos : m.start()]))
        name = m.group(1)
        val = values[name]
        if styles and name in styles:
            val = val.restyled(styles[name])
        out.append(Seg(val.text(), val, name))
        pos = m.end()
    if pos < len(template):
        out.append(Seg(template[pos:]))
    return _capitalise(out)


def _capitalise(line: Line) -> Line:
    """The first letter of a sentence upper-case (``a ferry`` -> ``A ferry``;
    a value is left as written: ``iPhone``, ``p99``)."""
    if line and line[0].val is None and line[0].text[:1].islower():
        line[0] = Seg(line[0].text[:1].upper() + line[0].text[1:])
    elif line and line[0].val is not None and line[0].val.type in ("rel", "num", "dur"):
        first = line[0]
        line[0] = Seg(first.text[:1].upper() + first.text[1:], first.val, first.slot)
    return line


# --- generating an entity --------------------------------------------------------------


class World:
    """The names one entity's sources draw on (so they recur across passages)."""

    def __init__(self, rng: random.Random, cast: list[Val]) -> None:
        self.rng = rng
        self.cast = cast
        self.products = [name_val("product", p) for p in rng.sample(PRODUCTS, 6)]
        self.places = [name_val("place", p) for p in rng.sample(PLACES, 6)]
        orgs = rng.sample(ORGS, 4)
        self.orgs = [name_val("org", o, o.split()[0]) for o in orgs]
        self.pets = [name_val("pet", p) for p in rng.sample(PETS, 2)]

    def value(self, spec: tuple, taken: list[Val]) -> Val:
        rng = self.rng
        kind = spec[0]
        if kind in ("person", "product", "place", "org", "pet"):
            pool = {"person": self.cast, "product": self.products, "place": self.places,
                    "org": self.orgs, "pet": self.pets}[kind]  # fmt: skip
            free = [v for v in pool if all(v.data[0] != t.data[0] for t in taken)]
            v = rng.choice(free or pool)
            if kind == "person":
                v = v.restyled(rng.choice(["first", "first", "full"]))
            return v
        if kind == "num":
            _, lo, hi, styles, unit = spec
            n = rng.randint(lo, hi)
            if hi > 1000 and rng.random() < 0.7:
                n = round(n, -2)
            style = rng.choice(styles)
            if style == "words" and not wordable(n):
                style = "digits"
            if style == "commas" and n < 1000:
                style = "digits"
            return Val("num", (n,), style, unit=unit)
        if kind == "money":
            _, lo, hi, styles = spec
            n = rng.randint(lo, hi)
            if n > 100:
                n = round(n, -1)
            return Val("money", (n,), rng.choice(styles))
        if kind == "pct":
            return Val("pct", (rng.randint(spec[1], spec[2]),), rng.choice(["%", "percent"]))
        if kind == "year":
            return Val("year", (rng.randint(2008, 2024),))
        if kind == "year_old":
            return Val("year", (rng.randint(1150, 1890),))
        if kind == "my":
            return Val(
                "my",
                (rng.randint(1, 12), rng.randint(2015, 2024)),
                rng.choice(["my", "my", "mofy"]),
            )
        if kind == "dm":
            return Val(
                "dm",
                (rng.randint(1, 28), rng.randint(1, 12)),
                rng.choice(["dm", "md", "dth", "mdth"]),
            )
        if kind == "wd":
            return Val("wd", (rng.randint(0, 6),))
        if kind == "clock":
            h = rng.randint(7, 22)
            m = rng.choice([0, 0, 15, 30, 45, rng.randint(1, 59)])
            style = rng.choice(["12", "24", "tight"] + (["h", "h"] if m == 0 else []))
            return Val("clock", (h, m), style)
        if kind == "iso":
            ymd = (rng.randint(2016, 2024), rng.randint(1, 12), rng.randint(1, 28))
            return Val("iso", ymd, rng.choice(["iso", "iso", "dmy", "mdy"]))
        if kind == "rel":
            units = spec[1]
            unit = rng.choice(units)
            if unit == "day":
                if rng.random() < 0.5:
                    return Val("rel", ("day", rng.choice(_DAY_WORDS[:3]), 0), "day")
                unit = "day"
            forms = ["last", "ago_n", "ago_a", "this", "few_ago"]
            if unit == "day":
                forms = ["ago_n", "ago_a", "few_ago"]
            if unit == "weekend":
                forms = ["last", "this", "next"]
            form = rng.choice(forms)
            n = rng.randint(2, 6) if form == "ago_n" else 0
            style = {"ago_n": rng.choice(["words", "words", "digits"]), "last": "last",
                     "next": "next", "few_ago": "few"}.get(form, form)  # fmt: skip
            return Val("rel", (form, unit, n), style)
        if kind == "dur":
            _, lo, hi, units = spec
            n = rng.randint(lo, hi)
            return Val("dur", (n,), rng.choice(["digits", "words"]), unit=rng.choice(units))
        if kind == "word":
            return Val("word", (rng.choice(spec[1]),))
        raise ValueError(kind)  # pragma: no cover


def _person(rng: random.Random, used: set[str]) -> Val:
    while True:
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        if first not in used and last not in used:
            used.update((first, last))
            short = first[:3] if len(first) >= 6 and rng.random() < 0.5 else None
            return name_val("person", f"{first} {last}", first, short)


def _statement(fam: Family, subject: Val, world: World, speaker: Val | None = None) -> Statement:
    values: dict[str, Val] = {"S": subject}
    taken = [subject] + ([speaker] if speaker else [])
    for slot, spec in fam.slots.items():
        v = world.value(spec, taken)
        values[slot] = v
        if v.type == "name":
            taken.append(v)
    return Statement(fam, values, speaker)


def _narrative(st: Statement, rng: random.Random) -> Line:
    st.template = rng.randrange(len(st.family.src))
    return _fill(st.narrative, st.values)


def _turn(st: Statement, rng: random.Random) -> Line:
    if st.family.say:
        st.template = rng.randrange(len(st.family.say))
        return _fill(st.family.say[st.template], st.values)
    return _narrative(st, rng)


ENTITY_TYPES = ("person", "system", "place", "org")


def entity(
    index: int, seed: int, taken: set[str], passages: int | None = None, timing: bool = False
) -> Entity:
    """The ``index``-th entity of the corpus of ``seed``: 20-60 passages (or
    exactly ``passages``), about a third of them distractors; facts for
    about half of the entities. ``taken``: the names of the entities made
    before it (each entity's name is its own)."""
    rng = random.Random(f"grounding:{seed}:{index}:{'t' if timing else 'e'}")
    etype = ENTITY_TYPES[index % 4]
    used: set[str] = set()
    tag = f"{index}" if not timing else f"t{index}"
    while True:
        if etype == "person":
            subject = _person(rng, set(used))
            name = subject.data[0]
        elif etype == "system":
            name = rng.choice(SYSTEMS) + rng.choice(SYSTEM_SUFFIXES)
            subject = name_val("system", name, name.split()[0] if " " in name else None)
        elif etype == "place":
            name = rng.choice(PLACE_ENTITIES) + rng.choice(PLACE_SUFFIXES)
            subject = name_val("place", name, name.split()[0] if " " in name else None)
        else:
            name = f"{rng.choice(ORG_PARTS)} {rng.choice(ORG_SUFFIXES)}"
            subject = name_val("org", name, name.split()[0])
        if name not in taken:
            taken.add(name)
            used.update(name.split())
            break
    cast = [_person(rng, used) for _ in range(rng.randint(3, 5))]
    world = World(rng, cast)
    ent = Entity(name, etype, subject, cast, timing=timing)
    families = [f for f in FAMILIES if f.subject == etype]
    total = passages or rng.randint(20, 60)
    distractors = 0 if timing else round(total * rng.uniform(0.25, 0.4))
    made: list[Passage] = []

    def add_session(count: int, distractor: bool) -> None:
        a = subject if etype == "person" else rng.choice(cast)
        b = rng.choice([c for c in cast if c is not a])
        a, b = a.restyled("first"), b.restyled("first")
        header = HEADERS[etype]
        st = _statement(header, subject, world)
        st.values["A"], st.values["B"] = a, b
        line = _fill(header.src[0], st.values)
        made.append(Passage(line_text(line), [(line, st)], None, distractor))
        speakers = [a, b]
        for i in range(count - 1):
            speaker = speakers[i % 2]
            if rng.random() < 0.15:
                text = rng.choice(FILLERS)
                made.append(
                    Passage(f"{speaker.text()}: {text}", [([Seg(text)], None)], speaker, distractor)
                )
                continue
            fam = rng.choice(families)
            if etype == "person":
                st = _statement(fam, speaker.restyled("full"), world, speaker)
                line = _turn(st, rng)
            else:
                st = _statement(fam, subject, world, speaker)
                line = _narrative(st, rng)
            sentences: list[tuple[Line, Statement | None]] = []
            if rng.random() < 0.25:
                filler = rng.choice(FILLERS)
                sentences.append(([Seg(filler)], None))
            sentences.append((line, st))
            text = " ".join(line_text(s) for s, _ in sentences)
            made.append(Passage(f"{speaker.text()}: {text}", sentences, speaker, distractor))

    def add_notes(count: int, distractor: bool) -> None:
        for _ in range(count):
            sentences = []
            for _ in range(1 if rng.random() < 0.7 else 2):
                fam = rng.choice(families)
                subj = subject
                if etype == "person" and rng.random() < 0.25:
                    subj = rng.choice(cast)
                st = _statement(fam, subj.restyled(rng.choice(subj.styles())), world)
                sentences.append((_narrative(st, rng), st))
            made.append(
                Passage(" ".join(line_text(s) for s, _ in sentences), sentences, None, distractor)
            )

    relevant = total - distractors
    docs: list[tuple[int, int]] = []  # (first passage, end) per document
    start = 0
    while len(made) < relevant:
        left = relevant - len(made)
        if rng.random() < 0.6 and left >= 4:
            add_session(min(left, rng.randint(6, 14)), False)
        else:
            add_notes(min(left, rng.randint(3, 8)), False)
        docs.append((start, len(made)))
        start = len(made)
    while len(made) < total:
        left = total - len(made)
        if left >= 4:
            add_session(min(left, rng.randint(6, 14)), True)
        else:
            add_notes(left, True)
        docs.append((start, len(made)))
        start = len(made)
    # passage texts are unique within an entity (pages map them back by text)
    seen: set[str] = set()
    for p in made:
        while p.text in seen:
            p.text += " " + rng.choice(FILLERS)
            p.sentences.append(([Seg(p.text.rsplit(" ", 1)[-1])], None))
        seen.add(p.text)
    ent.passages = made
    for n, (a, b) in enumerate(docs):
        ent.documents.append(
            {
                "text": "\n\n".join(p.text for p in made[a:b]),
                "uri": f"bench://grounding/{seed}/{tag}/{n}",
                "entities": [name],
            }
        )
    if not timing and rng.random() < 0.55:
        ent.facts = _facts(rng, ent, world, used)
    return ent


def _facts(rng: random.Random, ent: Entity, world: World, used: set[str]) -> list[dict[str, Any]]:
    out = []
    for predicate, kind in rng.sample(FACTS[ent.type], rng.randint(1, 2)):
        if kind == "place":
            value = rng.choice(world.places).data[0]
        elif kind == "org":
            value = rng.choice(world.orgs).data[0]
        elif kind == "product":
            value = rng.choice(world.products).data[0]
        elif kind == "person":
            value = _person(rng, used).data[0]
        elif kind == "number":
            value = f"{rng.randint(2, 900) * 10:,}"
        elif kind == "team":
            value = rng.choice(TEAMS)
        else:
            value = rng.choice(JOB_VALUES)
        fact: dict[str, Any] = {"subject": ent.name, "predicate": predicate, "value": value}
        if rng.random() < 0.6:
            y, m = rng.randint(2015, 2023), rng.randint(1, 12)
            fact["valid_from"] = f"{y:04d}-{m:02d}-01"
            if rng.random() < 0.3:
                fact["valid_to"] = f"{y + rng.randint(1, 3):04d}-{rng.randint(1, 12):02d}-01"
        out.append(fact)
    return out


def corpus(entities: int, seed: int, timing_entities: int = 0) -> list[Entity]:
    """``entities`` entities (people, systems, places and organisations in
    turn), then ``timing_entities`` with exactly 50 passages and no facts."""
    taken: set[str] = set()
    out = [entity(i, seed, taken) for i in range(entities)]
    out += [entity(i, seed, taken, passages=50, timing=True) for i in range(timing_entities)]
    return out


# --- pages -------------------------------------------------------------------------------

PAGE_KINDS = (
    "verbatim, cited",
    "verbatim, uncited",
    "paraphrased, cited",
    "paraphrased, uncited",
    "observations, cited",
    "observations, uncited",
)


@dataclass
class Unit:
    """One sentence of a page: its segments, the refs it cites, and where it came from."""

    line: Line
    refs: list[int]
    passages: list[Passage]
    statements: list[Statement]
    fact: bool = False
    bullet: bool = False
    end: str = "."

    def text(self, cited: bool, marker_style: int = 0) -> str:
        body = line_text(self.line).rstrip()
        end = ""
        if body[-1:] in ".!?":
            body, end = body[:-1], body[-1]
        else:
            end = self.end
        if not cited or not self.refs:
            return body + end
        if len(self.refs) == 1 or marker_style == 0:
            marks = "".join(f"[{r}]" for r in self.refs)
        else:
            marks = "[" + ", ".join(str(r) for r in self.refs) + "]"
        if marker_style == 2 and end:
            return f"{body}{end} {marks}"
        return f"{body} {marks}{end}"


@dataclass
class Page:
    kind: str
    title: str
    units: list[Unit]
    cited: bool
    layout: list[int]  # paragraph sizes (observation pages: one list)
    markers: list[int]  # marker style per unit

    def render(self, units: list[Unit] | None = None) -> str:
        units = units or self.units
        out = [f"# {self.title}", ""]
        i = 0
        for size in self.layout:
            chunk = units[i : i + size]
            texts = [u.text(self.cited, self.markers[i + k]) for k, u in enumerate(chunk)]
            if chunk and chunk[0].bullet:
                out.extend(f"- {t}" for t in texts)
            else:
                out.append(" ".join(texts))
            out.append("")
            i += size
        return "\n".join(out).rstrip() + "\n"


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[^\W_]+", text)}


def _restyle(
    values: dict[str, Val], rng: random.Random, seen: set[str], subject: str
) -> dict[str, str]:
    """A form for each value. A name is written only in forms its sources
    (``seen``: their words) allow: a faithful writer does not add a surname
    the cited passage never gave (the entity's own name excepted; a short
    form of a first name the source gives is allowed, ``Mel`` for ``Melanie``)."""
    out = {}
    for k, v in values.items():
        styles = v.styles()
        if v.type == "name" and v.data[0] != subject:
            first = v.data[1]
            styles = [
                s
                for s in styles
                if _words(v.restyled(s).text()) <= seen
                or (s == "short" and first and first.lower() in seen)
            ] or [v.style]
        out[k] = rng.choice(styles)
    return out


def _rewrite(template: str, rng: random.Random, drop: float) -> str:
    """Swap in synonyms and drop function words, in a template's literal text only."""
    parts = re.split(r"(\{\w+\})", template)
    out = []
    for part in parts:
        if part.startswith("{"):
            out.append(part)
            continue
        words = re.split(r"(\s+)", part)
        new = []
        for w in words:
            core = w.strip(",.!?")
            low = core.lower()
            if low in SYNONYMS and rng.random() < 0.6:
                rep = rng.choice(SYNONYMS[low])
                if core[:1].isupper():
                    rep = rep[:1].upper() + rep[1:]
                w = w.replace(core, rep)
            elif low in DROPPABLE and core == w and rng.random() < drop:
                w = ""
            new.append(w)
        out.append(re.sub(r"\s{2,}", " ", "".join(new)))
    text = "".join(out)
    return re.sub(r"^\s+", "", text)


_TIME_TAIL = re.compile(
    r"(?:\s+(?:in|on|at|every|for|over|by|since|during|back in)\s+\{(?:MY|DM|WD|CLK|YEAR|ISO|DUR)\}"
    r"|\s+\{REL\}|,\s+\{DM\})+$"
)


def _front(template: str) -> str:
    """Reorder clauses: a trailing time phrase goes first (``{S} ran … {REL}``
    -> ``{REL}, {S} ran …``; ``… at {CLK} on {WD}`` -> ``At {CLK} on {WD}, …``)."""
    m = _TIME_TAIL.search(template)
    if not m or m.start() == 0:
        return template
    tail = m.group(0).strip(" ,")
    return f"{tail[:1].upper()}{tail[1:]}, {template[: m.start()].rstrip(' ,')}"


def paraphrase(
    st: Statement, rng: random.Random, seen: set[str], subject: str, drop: float = 0.2
) -> Line:
    """One statement in other words, as the brief's rewrites make them: from
    its narrative template (a dialogue turn's first person becomes the
    speaker's name), a time phrase moved first, synonyms from
    :data:`SYNONYMS`, function words dropped, its values in other forms
    (every value kept; names as its source ``seen`` writes them, see
    :func:`_restyle`)."""
    template = st.narrative.rstrip(".!?")
    if rng.random() < 0.5:
        template = _front(template)
    template = _rewrite(template, rng, drop)
    styles = _restyle(st.values, rng, seen, subject)
    line = _fill(template, st.values, styles)
    if (
        st.speaker is not None
        and st.speaker.data[0] != st.values["S"].data[0]
        and rng.random() < 0.15
    ):
        who = st.speaker.restyled("first")
        line = [Seg("According to "), Seg(who.text(), who, "@"), Seg(", "), *_lower_first(line)]
    return line


def _lower_first(line: Line) -> Line:
    """A sentence's first letter lower-case again (it follows ``According to X, ``),
    unless it starts a name."""
    first = line[0] if line else None
    if first is None or not first.text[:1].isupper():
        return line
    if first.val is None and first.text.split(" ", 1)[0] != "I":
        return [Seg(first.text[:1].lower() + first.text[1:]), *line[1:]]
    if first.val is not None and first.val.type in ("rel", "num", "dur"):
        return [Seg(first.text[:1].lower() + first.text[1:], first.val, first.slot), *line[1:]]
    return line


def merged(sts: list[Statement], rng: random.Random, seen: set[str], name: str) -> Line:
    """Two or three statements about one subject in one sentence:
    ``Mel adopted a dog in May 2023, ran 12 miles with Ana last week and …``."""
    preds = []
    for st in sts:
        template = _rewrite(st.narrative.rstrip(".!?"), rng, 0.2)
        line = _fill(template, st.values, _restyle(st.values, rng, seen, name))
        preds.append(line[1:])  # without the subject
    subject = sts[0].values["S"]
    subject = subject.restyled(_restyle({"S": subject}, rng, seen, name)["S"])
    out: Line = [Seg(subject.text(), subject, "S")]
    for i, pred in enumerate(preds):
        if i:
            out.append(Seg(" and" if i == len(preds) - 1 else ","))
        out.extend(pred)
    return out


def mergeable(st: Statement) -> bool:
    return st.narrative.startswith("{S} ")


def _fact_line(fact: dict[str, Any], ent: Entity, rng: random.Random) -> Line:
    subject = ent.subject.restyled(rng.choice(ent.subject.styles()))
    pred, value = fact["predicate"], fact["value"]
    kind = next(k for p, k in FACTS[ent.type] if p == pred)
    if kind in ("place", "org", "product", "person"):
        v = Val("name", (value, None, None), "full", kind)
    elif kind == "number":
        v = Val("num", (int(value.replace(",", "")),), "commas" if "," in value else "digits")
    else:
        v = Val("word", (value,))
    values = {"S": subject, "V": v}

    def bound(iso: str) -> Val:
        y, m, d = (int(x) for x in iso.split("-"))
        style = rng.choice(["iso", "dmy", "my", "y"])
        if style == "my":
            return Val("my", (m, y), "my")
        if style == "y":
            return Val("year", (y,))
        return Val("iso", (y, m, d), style)

    frm, to = fact.get("valid_from"), fact.get("valid_to")
    if frm and rng.random() < 0.75:
        values["F"] = bound(frm)
        if to:
            values["T"] = bound(to)
            template = rng.choice(
                [
                    "{S}'s " + pred + " was {V} from {F} to {T}.",
                    "From {F} to {T}, the " + pred + " of {S} was {V}.",
                ]
            )
        else:
            template = rng.choice(
                [
                    "{S}'s " + pred + " has been {V} since {F}.",
                    "Since {F}, the " + pred + " of {S} is {V}.",
                ]
            )
    else:
        template = rng.choice(["{S}'s " + pred + " is {V}.", "The " + pred + " of {S} is {V}."])
    return _fill(template, values)


def _layout(rng: random.Random, n: int, bullets: bool) -> list[int]:
    if bullets:
        return [n]
    sizes = []
    while n > 0:
        k = min(n, rng.randint(2, 5))
        sizes.append(k)
        n -= k
    return sizes


def _statements(
    ent: Entity, rng: random.Random, count: int, distractors: bool
) -> list[tuple[Statement, Line, Passage]]:
    pool = [
        (st, line, p)
        for p in ent.passages
        if distractors or not p.distractor
        for line, st in p.sentences
        if st is not None
    ]
    picked = sorted(rng.sample(range(len(pool)), min(count, len(pool))))
    return [pool[i] for i in picked]


def faithful_pages(ent: Entity, rng: random.Random, sentences: int | None = None) -> list[Page]:
    """The six faithful pages of an entity (see :data:`PAGE_KINDS`), built from
    its non-distractor passages (any passage when ``sentences`` asks for a
    page of exactly that many sentences)."""
    pages = []
    title = ent.name
    for family in ("verbatim", "paraphrased", "observations"):
        count = sentences or rng.randint(6, 14)
        chosen = _statements(ent, rng, count + 12, sentences is not None)
        units: list[Unit] = []
        i = 0
        while i < len(chosen) and len(units) < count:
            st, line, p = chosen[i]
            if family == "verbatim":
                seg = list(line)
                if p.label and p.sentences[0][1] is st and rng.random() < 0.5:
                    seg = [Seg(p.label.text(), p.label, "@"), Seg(": "), *seg]
                units.append(Unit(seg, [p.ref], [p], [st]))
                i += 1
                continue
            if family == "paraphrased" and mergeable(st) and rng.random() < 0.35:
                same = [
                    (s2, l2, p2)
                    for s2, l2, p2 in chosen[i + 1 : i + 6]
                    if mergeable(s2)
                    and s2.values["S"].data[0] == st.values["S"].data[0]
                    and p2 is not p
                ]
                if same:
                    group = [(st, line, p), *same[: rng.choice([1, 1, 2])]]
                    for g in group[1:]:
                        chosen.remove(g)
                    ps = [g[2] for g in group]
                    sts = [g[0] for g in group]
                    refs = list(dict.fromkeys(q.ref for q in ps))
                    seen = set().union(*(_words(q.text) for q in ps))
                    units.append(Unit(merged(sts, rng, seen, ent.name), refs, ps, sts))
                    i += 1
                    continue
            if family == "observations":
                units.append(
                    Unit(
                        paraphrase(st, rng, _words(p.text), ent.name, drop=0.6),
                        [p.ref],
                        [p],
                        [st],
                        bullet=True,
                        end=rng.choice(["", "."]),
                    )
                )
            else:
                units.append(
                    Unit(paraphrase(st, rng, _words(p.text), ent.name), [p.ref], [p], [st])
                )
            i += 1
        for fact in ent.facts:
            units.append(
                Unit(
                    _fact_line(fact, ent, rng),
                    [],
                    [],
                    [],
                    fact=True,
                    bullet=family == "observations",
                )
            )
        if sentences:
            units = units[:sentences]
        layout = _layout(rng, len(units), family == "observations")
        markers = [rng.choice([0, 0, 1, 2]) for _ in units]
        for cited in (True, False):
            kind = f"{family}, {'cited' if cited else 'uncited'}"
            pages.append(Page(kind, title, units, cited, layout, markers))
    return pages


# --- corruptions -------------------------------------------------------------------------

CLASSES = (
    "number",
    "date",
    "relative time",
    "person, outside the sources",
    "person, same passages",
    "named entity, outside the sources",
    "negation",
    "roles swapped",
)

_NEGATED = re.compile(
    r"\b(?:did not|does not|do not|has not|have not|is not|was not|not|never|no longer)\s+", re.I
)
_NOT_TAIL = re.compile(r"n't\b")
_VERBS = {
    "adopted", "brought", "ran", "watched", "gave", "started", "spent", "read", "teaches",
    "moved", "met", "volunteered", "taught", "finished", "went", "saw", "received", "joined",
    "began", "stayed", "travelled", "got", "covered", "paid", "bought", "relocated", "left",
    "had", "learned", "completed", "attended", "stores", "keeps", "writes", "migrated",
    "runs", "deployed", "shipped", "cut", "rolled", "handed", "took", "passed", "costs",
    "released", "dates", "recorded", "presented", "walked", "processes", "handles", "takes",
    "serves", "handled", "drew", "welcomed", "came", "opens", "starts", "lies",
    "sits", "hiked", "founded", "rose", "fell", "opened", "launched", "drives", "comes",
    "showed", "hired", "added", "became", "replaced", "named", "made", "earned", "signed",
    "closed", "agreed", "grew", "expanded", "employs", "jogged", "coaches", "purchased",
    "set", "recruited", "established", "attracted", "introduced", "struck", "delivered",
    "commutes", "caught", "worked", "published", "missed", "reviewed", "chatted", "talked",
    "spoke", "chaired", "held", "stopped", "relies", "kept",
}  # fmt: skip


class Corrupted(NamedTuple):
    cls: str
    page: Page
    index: int  # the changed unit
    units: list[Unit]
    before: str  # the changed unit's text, faithful
    after: str  # and changed
    token: str  # what was put in


def _replace(unit: Unit, i: int, val: Val) -> Unit:
    line = list(unit.line)
    line[i] = Seg(val.text(), val, line[i].slot)
    if i == 0:
        line = _capitalise(line)
    return replace(unit, line=line)


def _outside(
    pool: list[str], mentioned: set[str], rng: random.Random, avoid: set[str]
) -> str | None:
    free = [x for x in pool if not ({w.lower() for w in x.split()} & mentioned) and x not in avoid]
    return rng.choice(free) if free else None


def corrupt(cls: str, page: Page, ent: Entity, rng: random.Random) -> Corrupted | None:
    """``page`` with one sentence changed in the way ``cls`` names (None when
    no sentence of the page has anything to change that way)."""
    mentioned = ent.mentioned()
    order = list(range(len(page.units)))
    rng.shuffle(order)
    for k in order:
        unit = page.units[k]
        new = _corrupt_unit(cls, unit, ent, mentioned, rng)
        if new is None:
            continue
        changed, token = new
        units = list(page.units)
        units[k] = changed
        m = page.markers[k]
        return Corrupted(
            cls, page, k, units, unit.text(page.cited, m), changed.text(page.cited, m), token
        )
    return None


def _corrupt_unit(cls: str, unit: Unit, ent: Entity, mentioned: set[str], rng: random.Random):
    idx = list(range(len(unit.line)))
    rng.shuffle(idx)
    segs = unit.line
    if cls in ("number", "date", "relative time"):
        want = {"number": NUMBER_TYPES, "date": DATE_TYPES, "relative time": TIME_TYPES}[cls]
        for i in idx:
            v = segs[i].val
            if v is None or v.type not in want:
                continue
            if cls == "number":
                new = changed_number(v, rng)
            elif cls == "date":
                new = changed_date(v, rng)
            else:
                new = changed_unit(v, rng)
            return _replace(unit, i, new), new.text()
        return None
    if cls in ("person, outside the sources", "person, same passages"):
        for i in idx:
            v = segs[i].val
            if v is None or v.type != "name" or v.kind != "person":
                continue
            present = {s.val.data[0] for s in segs if s.val is not None and s.val.type == "name"}
            if cls == "person, outside the sources":
                first = _outside(FIRST_NAMES, mentioned, rng, set())
                last = _outside(LAST_NAMES, mentioned, rng, set())
                if not first or not last:
                    return None
                new = Val(
                    "name",
                    (f"{first} {last}", first, None),
                    v.style if v.style != "short" else "first",
                    "person",
                )
            else:
                near = [n for p in unit.passages for n in p.names() if n.kind == "person"]
                if not near:  # a fact's sentence: the entity's other people
                    near = [n for p in ent.passages for n in p.names() if n.kind == "person"]
                candidates = {n.data[0]: n for n in near if n.data[0] not in present}
                if not candidates:
                    continue
                pick = candidates[rng.choice(sorted(candidates))]
                # written as the passages write it (a surname they never give
                # would be a name from outside them)
                seen = (
                    set().union(*(_words(p.text) for p in unit.passages))
                    if unit.passages
                    else set()
                )
                styles = [x for x in pick.styles() if _words(pick.restyled(x).text()) <= seen]
                new = pick.restyled(v.style if v.style in styles else (styles or ["first"])[0])
            return _replace(unit, i, new), new.text()
        return None
    if cls == "named entity, outside the sources":
        for i in idx:
            v = segs[i].val
            if (
                v is None
                or v.type != "name"
                or v.kind not in ("product", "place", "org")
                or segs[i].slot == "S"
            ):
                continue
            pool = {"product": PRODUCTS, "place": PLACES, "org": ORGS}[v.kind]
            pick = _outside(pool, mentioned, rng, {v.data[0]})
            if not pick:
                return None
            new = name_val(v.kind, pick)
            return _replace(unit, i, new), pick
        return None
    if cls == "negation":
        for i in idx:  # take a negation out
            s = segs[i]
            if s.val is None and (_NEGATED.search(s.text) or _NOT_TAIL.search(s.text)):
                new_text = _NOT_TAIL.sub("", _NEGATED.sub(_unnegate, s.text, count=1), count=1)
                if new_text != s.text:
                    line = list(segs)
                    line[i] = Seg(new_text)
                    return replace(unit, line=line), "(negation out)"
        for i, s in enumerate(segs):  # or put one in, before the first verb
            if s.val is not None:
                continue
            m = re.search(r"\b(" + "|".join(sorted(_VERBS, key=len, reverse=True)) + r")\b", s.text)
            if m:
                line = list(segs)
                line[i] = Seg(s.text[: m.start()] + "never " + s.text[m.start() :])
                return replace(unit, line=line), "never"
        return None
    if cls == "roles swapped":
        if len(unit.statements) != 1 or not unit.statements[0].family.roles:
            return None
        people = [
            i
            for i, s in enumerate(segs)
            if s.val is not None
            and s.val.type == "name"
            and s.val.kind == "person"
            and s.slot != "@"
        ]
        distinct = {segs[i].val.data[0] for i in people}
        if len(people) != 2 or len(distinct) != 2:
            return None
        a, b = people
        line = list(segs)
        va, vb = segs[a].val, segs[b].val
        line[a] = Seg(vb.text(), vb, segs[a].slot)
        line[b] = Seg(va.text(), va, segs[b].slot)
        return replace(unit, line=line), f"{vb.text()} <-> {va.text()}"
    raise ValueError(cls)  # pragma: no cover


def _unnegate(m: re.Match[str]) -> str:
    word = m.group(0).lower().split()[0]
    return {
        "did": "did ",
        "does": "does ",
        "do": "do ",
        "has": "has ",
        "have": "have ",
        "is": "is ",
        "was": "was ",
    }.get(word, "")
