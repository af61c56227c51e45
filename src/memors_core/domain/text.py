"""Text rules shared by the store, the scanners and the checks.

Everything here is a pure function of its input, so each rule can be tested
on its own (and is, with hypothesis).
"""

from __future__ import annotations

import os
import re
from array import array
from collections import namedtuple
from functools import cache
from itertools import chain
from operator import xor

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``memors-mcp search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable, Iterator


# Runs of letters and digits (\w without the underscore).
class _lazy:
    """A regular expression compiled the first time it is used: this module
    holds some thirty, and ``memors-mcp search`` needs one of them."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str):
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


_WORD = re.compile(r"[^\W_]+")
_HEADING = _lazy(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_SENTENCE_END = _lazy(r"(?<=[.!?])\s+")
_WIKI_LINK = _lazy(r"\[\[([^\[\]|\n]+?)(?:\|[^\[\]\n]*)?\]\]")

MAX_PASSAGE_WORDS = 400


# --- words -----------------------------------------------------------------


def words(text: str) -> list[str]:
    """Casefolded runs of letters and digits, in order."""
    if text.isascii():  # casefold is lower for ASCII, and cannot split a run
        return _WORD.findall(text.lower())
    return [w.casefold() for w in _WORD.findall(text)]


def index_words(text: str) -> list[str]:
    """Lowercased runs of letters and digits, in order: a text's words as
    the search indexes fold them. Lowercase, not casefold: SQLite's
    ``unicode61`` and PostgreSQL's index keep "ß" (casefold would make it
    "ss", a word neither index holds); the same runs as :func:`words`."""
    if text.isascii():
        return _WORD.findall(text.lower())
    return [w.lower() for w in _WORD.findall(text)]


@cache
def stop_words() -> frozenset[str]:
    """The shipped English stop-word list (function words only: negations
    and quantifiers are content words, see :data:`NEGATIONS`)."""
    # Read as a plain file (importlib.resources costs more than Python's own
    # start, and search reads this list); a zipped install falls back to it.
    here = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "stopwords.txt")
    try:
        with open(here, encoding="utf-8") as f:
            data = f.read()
    except OSError:  # pragma: no cover - a zipped install
        from importlib import resources

        data = resources.files("memors_core").joinpath("data/stopwords.txt").read_text("utf-8")
    return frozenset(
        line.strip() for line in data.splitlines() if line.strip() and not line.startswith("#")
    )


#: Words that turn a statement around or say how much of it holds: content
#: words for the checks ("does not" must not read like "does"), never stop words.
NEGATIONS = frozenset({"not", "no", "never", "nor", "without"})
QUANTIFIERS = frozenset({"all", "some", "only", "more", "most", "few", "every", "each", "both"})


@cache
def search_stop_words() -> frozenset[str]:
    """What a search query drops: the stop words, negations and quantifiers
    (a query's "not" or "all" would match nearly every row)."""
    return stop_words() | NEGATIONS | QUANTIFIERS


_NOT = _lazy(r"n['’]t\b", re.I)
_STEMMER = None
_STEMS: dict[str, str] = {}


def stem(word: str) -> str:
    """The Porter stem of a casefolded word (the stemmer FTS5's ``porter``
    tokenizer uses), so ``attended`` meets ``attend``."""
    got = _STEMS.get(word)
    if got is None:
        global _STEMMER
        if _STEMMER is None:
            import Stemmer

            _STEMMER = Stemmer.Stemmer("porter")
        if len(_STEMS) > 500_000:
            _STEMS.clear()
        got = _STEMS[word] = _STEMMER.stemWord(word)
    return got


#: Number words and their values (the checks read numbers by value).
NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}


def number_value(words: Iterable[str]) -> int:
    """The number a run of number words says (each in NUMBER_WORDS or
    SCALES, or ``dozen``): ``five hundred`` is 500, ``two thousand twenty``
    is 2020, ``two dozen`` is 24."""
    total = current = 0
    for w in words:
        if w in NUMBER_WORDS:
            current += NUMBER_WORDS[w]
        elif w == "dozen":
            current = max(current, 1) * 12
        elif SCALES[w] == 100:
            current = max(current, 1) * 100
        else:
            total += max(current, 1) * SCALES[w]
            current = 0
    return total + current


def _fold_numbers(ws: list[str]) -> list[str]:
    """Runs of number words as the number they say, in digits: ``seven`` is
    ``7``, ``five hundred`` is ``500``, ``twenty five`` is ``25``."""
    out: list[str] = []
    i, n = 0, len(ws)
    while i < n:
        if ws[i] not in NUMBER_WORDS and ws[i] not in SCALES:
            out.append(ws[i])
            i += 1
            continue
        start = i
        while i < n and (ws[i] in NUMBER_WORDS or ws[i] in SCALES):
            i += 1
        out.append(str(number_value(ws[start:i])))
    return out


_DIGIT_GROUP = _lazy(r"(?<=\d),(?=\d{3}(?!\d))")
_DIGITS_OR_NOT = _lazy(r"\d+|\D+")


def _number_words(ws: list[str]) -> list[str]:
    out = []
    for w in ws:
        if not w[0].isdigit():
            out.append(w)  # a word, or an identifier such as es2015: kept whole
            continue
        for part in _DIGITS_OR_NOT.findall(w):  # 8am, 5k, 1990s: the number, then the rest
            out.append((part.lstrip("0") or "0") if part[0].isdigit() else part)
    return out


def check_words(text: str) -> list[str]:
    """The words of ``text`` as the checks read them: casefolded runs of
    letters and digits, a contraction in ``n't`` read as ``not``, and
    numbers as values: ``seven`` is ``7`` and ``five hundred`` ``500``,
    ``6,100`` is ``6100``, ``08`` is ``8``, and a number parts from the
    letters after it (``8:15am`` gives ``8``, ``15``, ``am``)."""
    if "'" in text or "’" in text:
        text = _NOT.sub(" not", text)
    if "," in text:
        text = _DIGIT_GROUP.sub("", text)
    ws = _fold_numbers(words(text))
    return _number_words(ws) if any(c.isdigit() for c in text) else ws


def content_words(text: str) -> set[str]:
    """The content words of ``text``: its words (:func:`check_words`) that
    are not stop words, each reduced to its Porter stem."""
    stops = stop_words()
    return {stem(w) for w in check_words(text) if w not in stops}


def fold_name(name: str) -> str:
    """The merge-scanner form of a name: word runs joined by one space.

    ``quorum-replication`` and ``Quorum Replication`` fold equal.
    """
    return " ".join(words(name))


def match_key(name: str) -> str:
    """How entity names are matched: case-insensitive, white space folded."""
    return " ".join(name.casefold().split())


def fold_value(value: str) -> str:
    """How fact predicates and values are compared (as for merge names)."""
    return fold_name(value)


def content_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- shingles ----------------------------------------------------------------

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B97F4A7C15
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9


# A word's contribution to a 3-gram in the first, second and third position:
# its 64-bit hash times the position's multiplier, shifted into the low 61
# bits, with the word's stop-word flag in bit 63, 62 or 61. XOR-ing the three
# gives the 3-gram's token: a 61-bit hash under a 3-bit pattern of which of
# its words are stop words. Kept in three dicts so whole passages are mapped
# with C-level loops.
_FIRST: dict[str, int] = {}
_SECOND: dict[str, int] = {}
_THIRD: dict[str, int] = {}
_CACHE_LIMIT = 2_000_000  # a vocabulary, not a corpus


def _learn(words_: Iterable[str]) -> None:
    import hashlib

    stops = stop_words()
    for word in words_:
        h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
        stop = int(word in stops)
        _FIRST[word] = (stop << 63) | (((h * _P1) & _MASK) >> 3)
        _SECOND[word] = (stop << 62) | (((h * _P2) & _MASK) >> 3)
        _THIRD[word] = (stop << 61) | (((h * _P3) & _MASK) >> 3)


def shingle_hashes(text: str) -> list[int]:
    """Sorted, distinct 64-bit tokens of the word 3-grams of ``text``.

    Words are casefolded runs of letters and digits; a text of fewer than
    three words has no shingles. Each word is hashed once (blake2b, stable
    across processes); a 3-gram XORs its words' position-dependent parts,
    so order matters. The top three bits say which of the three words are
    stop words, so sorting tokens by value puts content-word 3-grams (rare)
    before function-word ones (common): a fixed global order in which a
    set's first tokens are rare, which the incremental duplicate scan's
    prefix index relies on.
    """
    ws = words(text)
    if len(ws) < 3:
        return []
    missing = set(ws).difference(_FIRST)
    if missing:
        if len(_FIRST) > _CACHE_LIMIT:
            _FIRST.clear()
            _SECOND.clear()
            _THIRD.clear()
            missing = set(ws)
        _learn(missing)
    first = map(_FIRST.__getitem__, ws)
    second = map(_SECOND.__getitem__, ws[1:])
    third = map(_THIRD.__getitem__, ws[2:])
    return sorted(set(map(xor, map(xor, first, second), third)))


def pack_shingles(hashes: list[int]) -> bytes:
    return array("Q", hashes).tobytes()


def unpack_shingles(blob: bytes | None) -> array:
    out = array("Q")
    if blob:
        out.frombytes(blob)
    return out


def jaccard(a: set[int] | frozenset[int], b: set[int] | frozenset[int]) -> float:
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# --- documents into passages ---------------------------------------------------


def _split_long(paragraph: str, reserved: int = 0) -> list[str]:
    """Split a paragraph of more than 400 words at sentence ends; the first
    chunk has ``reserved`` words less room (its heading lines take them).

    Linear in the paragraph's length, whatever its shape: a sentence longer
    than the room left is cut by stepping an index through its words, never
    by re-slicing what is left of it (which made one endless sentence
    quadratic).
    """
    chunks: list[str] = []
    current: list[str] = []
    count = 0
    room = MAX_PASSAGE_WORDS - reserved
    for sentence in _SENTENCE_END.split(paragraph):
        toks = sentence.split()
        n = len(toks)
        if not n:
            continue
        if current and count + n > room:
            chunks.append(" ".join(current))
            current, count = [], 0
            room = MAX_PASSAGE_WORDS
        if n <= room:
            current.append(sentence)
            count += n
            continue
        # A single sentence longer than the room left: cut it at the limit.
        start = 0
        while n - start > room:
            chunks.append(" ".join(toks[start : start + room]))
            start += room
            room = MAX_PASSAGE_WORDS
        if start < n:
            current, count = [" ".join(toks[start:])], n - start
        room = MAX_PASSAGE_WORDS
    if current:
        chunks.append(" ".join(current))
    return chunks


def split_passages(text: str) -> list[str]:
    """Split a document into passages.

    Blank lines separate paragraphs; a paragraph made only of ATX heading
    lines travels with the paragraph after it; a paragraph of up to 400
    words is one passage, a longer one is split at sentence ends (and a
    sentence longer than 400 words at the limit). Heading lines that alone
    pass the limit stand alone, split the same way. Linear in the length of
    the text.
    """
    return list(_passages(text))


def _paragraphs(text: str) -> Iterator[tuple[list[str], int]]:
    """Each paragraph's lines (right-stripped), and how many of them lead as
    heading lines (heading-only blocks joined to the paragraph after them)."""
    pending: list[str] = []  # heading-only blocks waiting for their paragraph
    block: list[str] = []
    heading = _HEADING.match  # compiled once, not looked up a line
    for line in chain(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), [""]):
        if line.strip():
            block.append(line.rstrip())
            continue
        if not block:
            continue
        lead = 0
        while lead < len(block) and heading(block[lead]):
            lead += 1
        if lead == len(block):
            pending.extend(block)
        elif pending:
            yield [*pending, *block], len(pending) + lead
            pending = []
        else:
            yield block, lead
        block = []
    if pending:
        yield pending, len(pending)


def _passages(text: str) -> Iterator[str]:
    for lines, cut in _paragraphs(text):
        paragraph = "\n".join(lines)
        if len(paragraph.split()) <= MAX_PASSAGE_WORDS:
            yield paragraph
            continue
        # Keep leading heading lines with the first chunk.
        head = lines[:cut]
        body = " ".join(line.strip() for line in lines[cut:])
        reserved = len(" ".join(head).split())
        if head and (not body or reserved >= MAX_PASSAGE_WORDS):
            # No room to share: the heading stands alone (split if it is itself too long).
            if reserved <= MAX_PASSAGE_WORDS:
                yield "\n".join(head)
            else:
                yield from _split_long(" ".join(line.strip() for line in head))
            head, reserved = [], 0
        chunks = _split_long(body, reserved)
        if head:
            chunks[0] = "\n".join([*head, chunks[0]])
        yield from chunks


def wiki_links(text: str) -> list[str]:
    """Names written as ``[[Name]]`` or ``[[Name|label]]``, in order, distinct."""
    seen: dict[str, str] = {}
    for m in _WIKI_LINK.finditer(text):
        name = " ".join(m.group(1).split())
        if name:
            seen.setdefault(match_key(name), name)
    return list(seen.values())


# --- pages into sentences ------------------------------------------------------

_FENCE = _lazy(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = _lazy(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_TABLE_SEP = _lazy(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
_HRULE = _lazy(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_SETEXT = _lazy(r"^ {0,3}(=+|-+)\s*$")
# A true link reference definition: ``[label]: URL`` and an optional title,
# nothing else on the line. The URL must look like one (angle brackets, a
# scheme, a path, an anchor or a host name), so ``[note]: Raft was invented``
# is visible text, not a definition. A footnote label (``[^1]``) never is.
_REF_DEF = _lazy(
    r"""^\ {0,3}\[(?!\^)[^\]]+\]:[ \t]*
        (?:<[^>\n]*>|[^\s<>]*(?:[/#:@][^\s<>]*|\.[A-Za-z]{2,}[^\s<>]*))
        (?:[ \t]+(?:"[^"]*"|'[^']*'|\([^)]*\)))?[ \t]*$""",
    re.X,
)
# Any other ``[x]: text`` line (a footnote, a note): its label is dropped and
# its text read as prose.
_LABELLED = _lazy(r"^\ {0,3}\[[^\]]+\]:\s*")
_IMAGE = _lazy(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = _lazy(r"\[([^\]]*)\]\([^)]*\)")
_REF_LINK = _lazy(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = _lazy(r"<((?:https?|mailto):[^>\s]+)>")
_HTML_COMMENT = _lazy(r"<!--.*?-->", re.S)
_ATX_TEXT = _lazy(r"^ {0,3}#{1,6}(?:[ \t]+|$)(.*?)(?:[ \t]+#+)?[ \t]*$")

# Citation markers: ``[1]``, ``[1, 3]``, ``[1][3]``, ``[memo://passage/ID]``.
# A run of bracket groups each holding refs; not one that closes a reference
# link (``[text][1]``, after a ``]``), a link (``[1](url)``) or a label (``[1]:``).
_REF = r"(?:\d{1,6}|memo://passage/[^\s,\[\]]+)"
_MARKER_GROUP = rf"\[[ \t]*{_REF}(?:[ \t]*,[ \t]*{_REF})*[ \t]*\]"
#: A run of citation markers (public: the executor takes them out of an old page).
_CITATION = rf"(?<![\]\[])(?:{_MARKER_GROUP})+(?![(:\[\]])"
CITATION_MARKERS = _lazy(_CITATION)
#: A run of citation markers with the white space before it, as a page's text
#: is read without them ("in 2014 [1]." -> "in 2014.").
SPACED_MARKERS = _lazy(rf"[ \t]*(?:{_CITATION})")
_ONE_REF = _lazy(_REF)
# Where a sentence's markers were, while the rest of the line is read.
_SLOT = _lazy("\ue000(\\d+)\ue001")
_AFTER_STOP = _lazy("([.!?])[ \t]*((?:\ue000\\d+\ue001[ \t]*)+)")
_ONLY_PUNCT = _lazy(r"^[\s.,;:!?)\]\"'’”*_-]*$")

#: What a page sentence is, for the checks: ``prose`` (paragraphs, list
#: items, table body cells, footnotes: every check reads it), ``heading``
#: and ``header`` (a table's header row: only the substitution check reads
#: them).
ROLES = ("prose", "heading", "header")


class PageSentence(namedtuple("PageSentence", "text refs role", defaults=((), "prose"))):
    """One sentence of a page: its visible ``text`` (citation markers taken
    out), the ``refs`` its markers name, in order (``int`` for ``[n]``, the
    address for ``[memo://passage/ID]``), and its ``role``."""

    __slots__ = ()


def citation_refs(marker: str) -> list[int | str]:
    """The refs of a run of markers: ``[1, 3][memo://passage/x]`` -> ``[1, 3, 'memo://passage/x']``."""
    return [int(r) if r.isdigit() else r for r in _ONE_REF.findall(marker)]


def _visible(text: str) -> str:
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = text.replace("[[", "").replace("]]", "")
    return text


class _Reader:
    """Reads one page's lines into :class:`PageSentence` values."""

    def __init__(self) -> None:
        self.out: list[PageSentence] = []
        self.markers: list[tuple[int | str, ...]] = []

    def _hide_markers(self, text: str) -> str:
        def slot(m: re.Match[str]) -> str:
            self.markers.append(tuple(citation_refs(m.group(0))))
            return f"\ue000{len(self.markers) - 1}\ue001"

        return CITATION_MARKERS.sub(slot, text) if "[" in text else text

    def add(self, text: str, role: str, split: bool = True) -> None:
        """Add the sentences of one line (or cell), their markers read."""
        text = _visible(self._hide_markers(text))
        if "\ue000" in text:  # "... in 2014. [1] Next": the markers cite the sentence before
            text = _AFTER_STOP.sub(lambda m: f" {m.group(2).strip()}{m.group(1)} ", text)
        pieces = _SENTENCE_END.split(text) if split else [text]
        for piece in pieces:
            refs: list[int | str] = []
            for m in _SLOT.finditer(piece):
                refs.extend(self.markers[int(m.group(1))])
            body = " ".join(_SLOT.sub(" ", piece).split())
            body = re.sub(r"\s+([.,;:!?])", r"\1", body)
            if refs and _ONLY_PUNCT.match(body) and self.out and self.out[-1].role == role:
                # "... in 2014. [1]": markers after the full stop cite the sentence before.
                last = self.out[-1]
                self.out[-1] = last._replace(refs=tuple(dict.fromkeys((*last.refs, *refs))))
                continue
            if body:
                self.out.append(PageSentence(body, tuple(dict.fromkeys(refs)), role))


def _table_rows(lines: list[str]) -> tuple[set[int], set[int]]:
    """Indices of table lines (with or without outer pipes): the header rows
    (a line with ``|`` followed by a separator row) and all rows (headers and
    the lines with ``|`` after the separator up to the next blank line)."""
    rows: set[int] = set()
    headers: set[int] = set()
    for i in range(1, len(lines)):
        sep = lines[i]
        if "|" in sep and _TABLE_SEP.match(sep) and "|" in lines[i - 1]:
            rows.add(i - 1)
            headers.add(i - 1)
            j = i + 1
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                rows.add(j)
                j += 1
    return headers, rows


# Long: one line-by-line state machine over Markdown's blocks (fence, blank
# line, list, paragraph start); every branch reads and sets that state, and
# the order of the branches is the precedence of the block rules.
def read_page(markdown: str) -> list[PageSentence]:
    """Every sentence of a page, in order, with its citation markers and role.

    Fenced and indented code, HTML comments, horizontal rules, true link
    reference definitions and table separator rows are not sentences.
    Headings (ATX and setext) and table header rows are, with their own
    roles. Link and image syntax keeps only its visible text. Every list item
    and every table cell is a sentence source of its own; prose splits after
    ``.``, ``!`` or ``?`` followed by white space, and at line ends; a
    footnote or any other ``[x]: text`` line is prose (its label dropped).
    Citation markers are taken out of the text into ``refs``; markers
    standing after a sentence's full stop cite that sentence. Sentences with
    no content words are dropped.
    """
    text = _HTML_COMMENT.sub("", markdown.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    headers, table_rows = _table_rows(lines)
    reader = _Reader()
    out = reader.out
    fence: str | None = None
    prev_blank = True
    in_list = False
    para_start: int | None = None  # where the current prose paragraph began in ``out``
    for i, raw in enumerate(lines):
        if fence is not None:
            m = _FENCE.match(raw)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            prev_blank = False
            continue
        m = _FENCE.match(raw)
        if m:
            fence = m.group(1)
            para_start = None
            if not raw[:1].isspace():
                in_list = False  # a fence at the margin ends a list
            continue
        if not raw.strip():
            prev_blank = True
            para_start = None
            continue
        indented = raw.startswith("    ") or raw.startswith("\t")
        if indented and prev_blank and not in_list:
            continue  # indented code block (a run of such lines after a blank)
        was_blank, prev_blank = prev_blank, False
        line = raw.strip()
        if line.startswith(">"):
            line = line.lstrip(">").strip()
            if not line:
                continue
        if para_start is not None and _SETEXT.match(line):
            # "Title" over "===" or "---": the paragraph was a setext heading
            # (checked before horizontal rules, which "---" also matches).
            out[para_start:] = [s._replace(role="heading") for s in out[para_start:]]
            para_start = None
            continue
        heading = _HEADING.match(line)
        if heading or _HRULE.match(line) or _REF_DEF.match(line):
            if heading:
                reader.add(_ATX_TEXT.match(line).group(1), "heading", split=False)
            in_list = False
            para_start = None
            continue
        if _SETEXT.match(line):
            continue
        if "|" in line and _TABLE_SEP.match(line):
            para_start = None
            continue
        if i in table_rows or ("|" in line and (line.startswith("|") or line.endswith("|"))):
            role = "header" if i in headers else "prose"
            for cell in line.strip("|").split("|"):
                if cell.strip():
                    reader.add(cell.strip(), role, split=False)
            in_list = False
            para_start = None
            continue
        m = _LIST_ITEM.match(raw)
        if m:
            in_list = True
            para_start = None
            reader.add(raw[m.end() :], "prose")
            continue
        if in_list and was_blank and not indented:
            in_list = False
        if para_start is None:
            para_start = len(out)
        label = _LABELLED.match(line)
        reader.add(line[label.end() :] if label else line, "prose")
    return [s for s in out if content_words(s.text)]


def page_sentences(markdown: str) -> list[str]:
    """The sentences of a page that the corruption check reads: the prose of
    :func:`read_page` (not headings, not table header rows), markers out."""
    return [s.text for s in read_page(markdown) if s.role == "prose"]


_TITLE_HEADING = _lazy(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN = _lazy(r"^ {0,3}(`{3,}|~{3,})")


def first_heading(body: str, limit: int = 500) -> str | None:
    """The text of a Markdown document's first level-1 ATX heading (``# Title``,
    outside fenced code), its default title; None when it has none (or an
    empty one, or one longer than ``limit`` characters)."""
    if "#" not in body:  # no heading at all: no line to read (9 MB of lines took 4 s)
        return None
    fence = None
    fence_open, title_heading = _FENCE_OPEN.match, _TITLE_HEADING.match  # compiled once
    for line in body.splitlines():
        opened = fence_open(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        m = title_heading(line)
        if m:
            title = " ".join(m.group(1).split())
            return title if 0 < len(title) <= limit else None
    return None
