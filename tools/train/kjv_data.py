"""The King James Bible as training text: read it from Debian's `bible` program (package
bible-kjv), parse it into books / chapters / verses, hold out whole books, and write the splits.

Text layout of a split file (what the model is trained and evaluated on): one chapter per line,
its verses joined by single spaces, verse and chapter references dropped; books follow each other
in canonical order. The file is plain UTF-8 (ASCII in practice) ending with a newline.
"""

import re
import subprocess

BIBLE_PROGRAM = "/usr/bin/bible"
WHOLE_BIBLE = "Gen1:1-Rev22:21"

# Held out for evaluation: whole books spread over both testaments and genres
# (history, wisdom, prophecy, gospel, epistle); every other book is training text.
HELD_OUT_BOOKS = ("Joshua", "Ecclesiastes", "Daniel", "Mark", "Romans")

_HEADER = re.compile(r"^(\S.*) (\d+)$")        # "Genesis 1", "1 Samuel 3", "Song of Solomon 2"
_VERSE = re.compile(r"^  (\d+) (\S.*)$")       # "  1 In the beginning God created ..."


class Book:
    """One book: its name and chapters, each chapter a list of verse texts (references dropped)."""

    def __init__(self, name):
        self.name = name
        self.chapters = []

    def text(self):
        """The book as split-file text: one line per chapter, verses joined by spaces."""
        return "".join(" ".join(ch) + "\n" for ch in self.chapters)

    def verses(self):
        return [v for ch in self.chapters for v in ch]


def read_bible_output(program=BIBLE_PROGRAM, passages=WHOLE_BIBLE):
    """Raw text printed by `bible -l0 PASSAGES` (l0: no line wrapping). Raises with the command
    named if the program is missing or fails."""
    try:
        out = subprocess.run([program, "-l0", passages], check=True, capture_output=True)
    except FileNotFoundError:
        raise RuntimeError("%s not found: install Debian's bible-kjv (scripts/setup.sh)" % program)
    except subprocess.CalledProcessError as e:
        raise RuntimeError("%s -l0 %s failed (exit %d): %s"
                           % (program, passages, e.returncode, e.stderr.decode(errors="replace")))
    return out.stdout.decode("utf-8")


def parse_bible(raw):
    """Books in order from `bible -l0` output: "Book N" chapter headers, "  V text" verse lines,
    blank lines between. Chapters and verses must count up from 1; anything else is an error
    naming the line."""
    books = []
    verse_no = 0
    for lineno, line in enumerate(raw.split("\n"), 1):
        if not line.strip():
            continue
        m = _VERSE.match(line)
        if m:
            if not books:
                raise ValueError("line %d: verse before any chapter header: %r" % (lineno, line))
            verse_no += 1
            if int(m.group(1)) != verse_no:
                raise ValueError("line %d: expected verse %d, got %r" % (lineno, verse_no, line))
            books[-1].chapters[-1].append(m.group(2).strip())
            continue
        m = _HEADER.match(line)
        if not m:
            raise ValueError("line %d: neither a chapter header nor a verse: %r" % (lineno, line))
        name, chapter = m.group(1), int(m.group(2))
        if not books or books[-1].name != name:
            books.append(Book(name))
        if chapter != len(books[-1].chapters) + 1:
            raise ValueError("line %d: %s chapter %d out of order" % (lineno, name, chapter))
        books[-1].chapters.append([])
        verse_no = 0
    for b in books:
        for i, ch in enumerate(b.chapters, 1):
            if not ch:
                raise ValueError("%s %d has no verses" % (b.name, i))
    return books


def split_books(books, held_out=HELD_OUT_BOOKS):
    """(train books, held-out books), both in canonical order. Every held-out name must exist."""
    names = {b.name for b in books}
    missing = [n for n in held_out if n not in names]
    if missing:
        raise ValueError("held-out books not in the text: %s" % ", ".join(missing))
    train = [b for b in books if b.name not in held_out]
    held = [b for b in books if b.name in held_out]
    return train, held


def split_text(books):
    """The split file's text for `books` (see the module docstring)."""
    return "".join(b.text() for b in books)


def verse_lines(books):
    """One verse per line: the tokenizer's training corpus (SentencePiece reads line by line and
    skips over-long lines, so chapters are too long to be its sentences)."""
    return "".join(v + "\n" for b in books for v in b.verses())
