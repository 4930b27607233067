"""passkey_check (the pilot runs' retrieval check, --passkey-check-trials): prompts laid out as
mcserve-eval's trained template, scoring as its PasskeyAnswerIsCorrect, and the per-eval hook."""

import os

import sentencepiece as spm
import torch

import kjv_data
import passkey
import passkey_check
import train
import trainer

FIXTURE_TOKENIZER = os.path.join(os.path.dirname(passkey_check.__file__), "..", "..", "tests", "data",
                                 "tokenizer.model")


def _sp_and_text():
    sp = spm.SentencePieceProcessor(model_file=FIXTURE_TOKENIZER)
    text = kjv_data.split_text(kjv_data.parse_bible(kjv_data.read_bible_output(passages="Ruth1:1-Ruth1:22")))
    return sp, torch.tensor(sp.encode(text), dtype=torch.long)


def test_prompt_at_depth_zero_is_the_training_example_layout():
    sp, hay = _sp_and_text()
    ids, at = passkey_check.build_prompt(sp, hay, 0, 90, 0.0, 12345)
    needle = sp.encode(passkey.INTRO.format(key=12345))
    question = sp.encode(passkey.QUESTION.format(key=12345))[:-7]   # without " 12345."
    assert len(ids) == 90 and at == 1 and ids[0] == 1
    assert ids[1:1 + len(needle)] == needle and ids[-len(question):] == question
    assert ids[1 + len(needle):-len(question)] == hay[:90 - 1 - len(needle) - len(question)].tolist()


def test_prompt_needle_at_depth_starts_a_word():
    sp, hay = _sp_and_text()
    ids, at = passkey_check.build_prompt(sp, hay, 0, 120, 0.5, 54321)
    needle = sp.encode(passkey.INTRO.format(key=54321))
    n_filler = 120 - 1 - len(needle) - len(sp.encode(passkey_check.QUESTION))
    first = next(i for i in range(round(0.5 * n_filler), n_filler) if sp.id_to_piece(int(hay[i])).startswith("\u2581"))
    assert len(ids) == 120 and at == 1 + first
    assert ids[at:at + len(needle)] == needle
    assert ids[1:at] == hay[:first].tolist() and ids[at + len(needle)] == int(hay[first])


def test_score_as_mcserve_eval():
    assert passkey_check.score(" 68213.", 68213) == (True, 5)
    assert passkey_check.score("68213 is", 68213) == (True, 5)
    assert passkey_check.score(" 682135", 68213) == (False, 5)
    assert passkey_check.score(" 6821", 68213) == (False, 4)
    assert passkey_check.score(" 14111.", 68213) == (False, 1)
    assert passkey_check.score("the LORD", 68213) == (False, 0)
    assert passkey_check.score(" 68113.", 68213) == (False, 4)


def test_passkey_check_trials_hook_records_accuracy():
    sp, hay = _sp_and_text()
    args = train.parse_args(["--hidden", "32", "--layers", "1", "--heads", "2", "--head-dim", "8",
                             "--chunk", "16", "--passkey-check-trials", "2"])
    model = train.build_model(args, 320)

    class Corpus:
        pass
    corpus = Corpus()
    corpus.sp, corpus.heldout_ids = sp, hay
    record = train.passkey_eval(args, corpus)(model)
    assert set(record) == {"passkey_128_0.0", "passkey_128_rand", "passkey_256_0.0", "passkey_256_rand"}
    assert all(0.0 <= v <= 1.0 for v in record.values()) and model.training
    assert train.passkey_eval(train.parse_args([]), corpus) is None
