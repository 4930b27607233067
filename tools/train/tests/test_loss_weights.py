"""--passkey-answer-weight: weight W sits exactly on the 5 key-digit targets after the question
(not on the intro's copy of the key, not one position early or late), and the loss is the
weighted mean."""

import math
import os

import sentencepiece as spm
import torch
import torch.nn.functional as F

import kjv_data
import loss_weights
import passkey
import trainer
import windows as win

FIXTURE_TOKENIZER = os.path.join(os.path.dirname(win.__file__), "..", "..", "tests", "data", "tokenizer.model")


class _Corpus:
    def __init__(self):
        self.sp = spm.SentencePieceProcessor(model_file=FIXTURE_TOKENIZER)
        text = kjv_data.split_text(kjv_data.parse_bible(kjv_data.read_bible_output(passages="Ruth1:1-Ruth2:23")))
        self.train_ids = torch.tensor(self.sp.encode(text), dtype=torch.long)
        self.heldout_ids = self.train_ids[:1000]


def test_answer_weights_cover_exactly_five_targets():
    w = loss_weights.answer_weights(loss_weights.answer_mask(10, [[3], [], [5]]), 4.0)
    assert w[0].tolist() == [1, 1, 1, 4, 4, 4, 4, 4, 1, 1]
    assert w[1].tolist() == [1] * 10
    assert w[2].tolist() == [1, 1, 1, 1, 1, 4, 4, 4, 4, 4]
    assert loss_weights.answer_mask(12, [[0, 7]])[0].tolist() == [True] * 5 + [False] * 2 + [True] * 5


def test_answer_that_does_not_fit_is_an_error():
    try:
        loss_weights.answer_mask(10, [[6]])
    except ValueError as e:
        assert "does not fit" in str(e)
    else:
        raise AssertionError("answer at 6 of a 10-token window accepted")


def test_weight_sits_on_the_key_digits_after_the_question():
    corpus = _Corpus()
    s = trainer.TrainSettings(steps=1, batch=12, context=96, lr=1e-3, min_lr_ratio=0.1, warmup=1, weight_decay=0.1,
                              clip=1.0, eval_interval=1, eval_windows=1, passkey_fraction=1.0, seed=3,
                              passkey_answer_weight=7.0)
    maker = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, s.context)
    batch, mask = trainer.training_batch(corpus, s, torch.Generator().manual_seed(5), maker)
    weights = loss_weights.answer_weights(mask, s.passkey_answer_weight)
    inputs, targets = win.model_inputs(batch)
    question = corpus.sp.encode(passkey.QUESTION.format(key=12345))[:-6]   # ... "The pass key is ▁"
    space = corpus.sp.piece_to_id("\u2581")
    for row in range(s.batch):
        heavy = torch.nonzero(weights[row] == 7.0).flatten().tolist()
        assert len(heavy) == 5 and heavy == list(range(heavy[0], heavy[0] + 5))
        assert int((weights[row] == 1.0).sum()) == s.context - 5
        a = heavy[0]
        digits = corpus.sp.decode(targets[row, a:a + 5].tolist())
        text = corpus.sp.decode(batch[row].tolist())
        key = text[len("The pass key is "):len("The pass key is ") + 5]
        assert digits == key and digits.isdigit()                      # the targets weighed are the key
        assert targets[row, a + 5].item() == corpus.sp.piece_to_id(".")  # not one late
        assert inputs[row, a].item() == space                          # the model has read "... is ▁"
        assert targets[row, a - len(question):a].tolist() == question   # right after the question
        assert a > 5 + len(question)                                    # not the intro's copy of the key


def test_weighted_cross_entropy_is_the_weighted_mean():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 6, 11, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 11, (2, 6), generator=g)
    ones = torch.ones(2, 6)
    plain = F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1))
    loss, none = loss_weights.weighted_cross_entropy(logits, targets, ones)
    assert math.isclose(float(loss), float(plain), rel_tol=1e-12) and none is None
    mask = loss_weights.answer_mask(6, [[1], []])
    loss, answer_nll = loss_weights.weighted_cross_entropy(logits, targets, loss_weights.answer_weights(mask, 3.0), mask)
    nll = F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1), reduction="none").view(2, 6)
    expected = (nll.sum() + 2.0 * nll[0, 1:6].sum()) / (12 + 2.0 * 5)
    assert math.isclose(float(loss), float(expected), rel_tol=1e-12)
    assert math.isclose(answer_nll, float(nll[0, 1:6].mean()), rel_tol=1e-12)


def test_packed_windows_mark_every_answer():
    corpus = _Corpus()
    s = trainer.TrainSettings(steps=10, batch=6, context=300, lr=1e-3, min_lr_ratio=0.1, warmup=1, weight_decay=0.1,
                              clip=1.0, eval_interval=1, eval_windows=1, passkey_fraction=1.0, seed=3,
                              passkey_answer_weight=7.0, passkey_pack=True, passkey_curriculum=100)
    maker = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, s.context)
    batch, mask = trainer.training_batch(corpus, s, torch.Generator().manual_seed(5), maker, step=0)
    inputs, targets = win.model_inputs(batch)
    question = corpus.sp.encode(passkey.QUESTION.format(key=12345))[:-6]
    for row in range(s.batch):
        starts = [i for i in range(s.context) if mask[row, i] and (i == 0 or not mask[row, i - 1])]
        assert len(starts) >= 2 and int(mask[row].sum()) == 5 * len(starts)
        for a in starts:
            assert corpus.sp.decode(targets[row, a:a + 5].tolist()).isdigit()
            assert targets[row, a + 5].item() == corpus.sp.piece_to_id(".")
            assert targets[row, a - len(question):a].tolist() == question
