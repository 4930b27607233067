"""The KJV reader/parser and the deterministic train / held-out split (stage 1)."""

import filecmp
import os

import pytest

import kjv_data
import prepare_data

SAMPLE = """
Ruth 1

  1 Now it came to pass in the days when the judges ruled.
  2 And the name of the man was Elimelech.

Ruth 2

  1 And Naomi had a kinsman of her husband's.

Jonah 1

  1 Now the word of the LORD came unto Jonah.

1 Samuel 1

  1 Now there was a certain man of Ramathaimzophim.
  2 And he had two wives.
"""

# Whole small books from the real program: two for training, two held out.
SMALL_PASSAGES = ("Ruth1:1-Ruth4:22", "Obadiah1:1-Obadiah1:21", "Jonah1:1-Jonah4:11", "Philemon1:1-Philemon1:25")


def test_parse_drops_references_and_keeps_text():
    books = kjv_data.parse_bible(SAMPLE)
    assert [b.name for b in books] == ["Ruth", "Jonah", "1 Samuel"]
    assert books[0].chapters == [["Now it came to pass in the days when the judges ruled.",
                                  "And the name of the man was Elimelech."],
                                 ["And Naomi had a kinsman of her husband's."]]
    assert books[0].text() == ("Now it came to pass in the days when the judges ruled. "
                               "And the name of the man was Elimelech.\n"
                               "And Naomi had a kinsman of her husband's.\n")


def test_split_holds_out_whole_books_in_order():
    train, held = kjv_data.split_books(kjv_data.parse_bible(SAMPLE), held_out=("Jonah",))
    assert [b.name for b in train] == ["Ruth", "1 Samuel"]
    assert kjv_data.split_text(held) == "Now the word of the LORD came unto Jonah.\n"
    assert kjv_data.verse_lines(train).count("\n") == 5
    with pytest.raises(ValueError, match="Tobit"):
        kjv_data.split_books(kjv_data.parse_bible(SAMPLE), held_out=("Jonah", "Tobit"))


@pytest.mark.parametrize("raw, message", [
    ("Ruth 1\n  1 a\n  3 b\n", "expected verse 2"),
    ("Ruth 2\n  1 a\n", "chapter 2 out of order"),
    ("  1 a\n", "before any chapter header"),
    ("Ruth 1\n  1 a\nsomething else\n", "neither a chapter header nor a verse"),
    ("Ruth 1\nRuth 2\n  1 a\n", "Ruth 1 has no verses"),
])
def test_parse_rejects_malformed_text(raw, message):
    with pytest.raises(ValueError, match=message):
        kjv_data.parse_bible(raw)


def test_whole_bible_from_the_bible_program():
    books = kjv_data.parse_bible(kjv_data.read_bible_output())
    assert len(books) == 66
    assert sum(len(b.chapters) for b in books) == 1189
    assert sum(len(b.verses()) for b in books) == 31102
    assert books[0].chapters[0][0] == "In the beginning God created the heaven and the earth."
    train, held = kjv_data.split_books(books)
    assert [b.name for b in held] == list(kjv_data.HELD_OUT_BOOKS)
    assert len(train) == 61


def test_missing_program_is_named():
    with pytest.raises(RuntimeError, match="bible-kjv"):
        kjv_data.read_bible_output(program="/nonexistent/bible")


def test_prepare_is_deterministic(tmp_path):
    raw = kjv_data.read_bible_output(passages=" ".join(SMALL_PASSAGES))
    args = dict(raw_bible=raw, held_out=("Jonah", "Philemon"), vocab_size=400)
    a = prepare_data.prepare(str(tmp_path / "a"), **args)
    b = prepare_data.prepare(str(tmp_path / "b"), **args)
    names = sorted(os.listdir(tmp_path / "a"))
    assert names == ["kjv_heldout.txt", "kjv_train.txt", "split.json", "tokenizer.model", "tokenizer_corpus.txt"]
    match, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", names, shallow=False)
    assert (mismatch, errors) == ([], [])
    assert a.train_ids.tolist() == b.train_ids.tolist()
    assert a.summary["held_out_books"] == ["Jonah", "Philemon"]
    assert a.summary["train_verses"] == 85 + 21 and a.summary["heldout_verses"] == 48 + 25
    held_text = (tmp_path / "a" / "kjv_heldout.txt").read_text()
    assert held_text.startswith("Now the word of the LORD came unto Jonah")
    assert held_text.count("\n") == 4 + 1            # one line per chapter
    assert a.sp.decode(a.heldout_ids.tolist()) == held_text
