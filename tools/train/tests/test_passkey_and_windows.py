"""Training / evaluation windows, held-out perplexity, the passkey examples and the LR schedule."""

import math
import os

import sentencepiece as spm
import torch

import kjv_data
import passkey
import trainer
import windows as win

FIXTURE_TOKENIZER = os.path.join(os.path.dirname(win.__file__), "..", "..", "tests", "data", "tokenizer.model")


class _Corpus:
    def __init__(self):
        self.sp = spm.SentencePieceProcessor(model_file=FIXTURE_TOKENIZER)
        text = kjv_data.split_text(kjv_data.parse_bible(kjv_data.read_bible_output(passages="Ruth1:1-Ruth4:22")))
        self.train_ids = torch.tensor(self.sp.encode(text), dtype=torch.long)
        self.heldout_ids = self.train_ids[:1000]


def test_model_inputs_shift_in_bos():
    inputs, targets = win.model_inputs([[5, 6, 7], [8, 9, 10]])
    assert inputs.tolist() == [[1, 5, 6], [1, 8, 9]]
    assert targets.tolist() == [[5, 6, 7], [8, 9, 10]]


def test_tiled_windows_drop_the_remainder():
    w = win.tiled_windows(torch.arange(10), 3)
    assert w.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert win.tiled_windows(torch.arange(10), 3, limit=2).shape == (2, 3)


def test_random_windows_are_slices_and_seeded():
    stream = torch.arange(100)
    a = win.random_windows(stream, 8, 5, torch.Generator().manual_seed(1))
    b = win.random_windows(stream, 8, 5, torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert all(row.tolist() == list(range(row[0], row[0] + 8)) for row in a)


def test_perplexity_of_a_uniform_model_is_the_vocab_size():
    vocab = 37
    uniform = lambda inputs: torch.zeros(inputs.shape[0], inputs.shape[1], vocab)
    ppl, nll, n = win.perplexity(uniform, win.tiled_windows(torch.arange(50) % vocab, 7), batch=3)
    assert n == 49 and abs(ppl - vocab) < 1e-9 and abs(nll - math.log(vocab)) < 1e-12


def test_perplexity_scores_every_target_once():
    # a model that puts logit 10 on the right answer (it peeks at the targets) beats one that does not
    stream = torch.arange(64) % 11
    windows = win.tiled_windows(stream, 8)
    targets = win.model_inputs(windows)[1]
    calls = iter(range(100))

    def peeking(inputs):
        i = next(calls)
        return 10.0 * torch.nn.functional.one_hot(targets[2 * i:2 * i + inputs.shape[0]], 11).double()

    ppl, _, n = win.perplexity(peeking, windows, batch=2)
    expected = math.exp(-(10 - math.log(math.exp(10) + 10)))
    assert n == 64 and abs(ppl - expected) < 1e-9


def test_passkey_windows():
    corpus = _Corpus()
    maker = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, 96)
    g = torch.Generator().manual_seed(7)
    lengths = set()
    for _ in range(20):
        ids, key = maker.window(g)
        assert len(ids) == 96 and 10000 <= key <= 99999
        text = corpus.sp.decode(ids)
        intro = passkey.INTRO.format(key=key)
        question = passkey.QUESTION.format(key=key)
        assert text.startswith(intro + " ")
        assert " " + question in text
        lengths.add(text.index(question))
    assert len(lengths) > 5   # the answer sits at varying depths
    again = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, 96).window(torch.Generator().manual_seed(7))
    assert again == passkey.PasskeyMaker(corpus.sp, corpus.train_ids, 96).window(torch.Generator().manual_seed(7))


def test_passkey_context_too_short_is_an_error():
    corpus = _Corpus()
    try:
        passkey.PasskeyMaker(corpus.sp, corpus.train_ids, 10)
    except ValueError as e:
        assert "too short" in str(e)
    else:
        raise AssertionError("context 10 accepted")


def _settings(**kw):
    base = dict(steps=100, batch=8, context=64, lr=1e-3, min_lr_ratio=0.1, warmup=10, weight_decay=0.1, clip=1.0,
                eval_interval=50, eval_windows=2, passkey_fraction=0.0, seed=3)
    base.update(kw)
    return trainer.TrainSettings(**base)


def test_training_batch_mixes_passkeys_at_the_requested_rate():
    corpus = _Corpus()
    s = _settings(passkey_fraction=0.5, batch=64, context=128)
    maker = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, s.context)
    batch, mask = trainer.training_batch(corpus, s, torch.Generator().manual_seed(0), maker)
    intro = corpus.sp.encode(passkey.INTRO.format(key=12345))[:3]   # "The pass key" pieces
    n_passkey = sum(row[:3].tolist() == intro for row in batch)
    assert batch.shape == (64, 128) and 16 <= n_passkey <= 48
    is_passkey = torch.tensor([row[:3].tolist() == intro for row in batch])
    assert torch.equal(mask.sum(1), 5 * is_passkey.long())   # one answer (5 key digits) per passkey window
    plain, _ = trainer.training_batch(corpus, _settings(batch=64, context=128), torch.Generator().manual_seed(0), None)
    assert sum(row[:3].tolist() == intro for row in plain) == 0


def test_lr_schedule_warms_up_then_decays_to_the_floor():
    s = _settings()
    assert abs(trainer.lr_at(0, s) - 1e-4) < 1e-15
    assert abs(trainer.lr_at(9, s) - 1e-3) < 1e-15
    assert abs(trainer.lr_at(99, s) - 1e-4) < 1e-15
    lrs = [trainer.lr_at(i, s) for i in range(10, 100)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_passkey_longest_caps_the_example():
    corpus = _Corpus()
    maker = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, 128)
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        ids, key, answer = maker.example(g, longest=maker.shortest + 4)
        assert len(ids) == 128 and answer + 6 <= maker.shortest + 4   # the example ends with "<key>." by then
        assert corpus.sp.decode(ids[answer:answer + 5]) == str(key)


def test_packed_window_holds_examples_back_to_back():
    corpus = _Corpus()
    maker = passkey.PasskeyMaker(corpus.sp, corpus.train_ids, 200)
    g = torch.Generator().manual_seed(4)
    for _ in range(10):
        ids, keys, answers = maker.packed(g, longest=maker.shortest + 20)
        assert len(ids) == 200 and len(keys) == len(answers) >= 2 and answers == sorted(answers)
        text = corpus.sp.decode(ids)
        for key, answer in zip(keys, answers):
            assert corpus.sp.decode(ids[answer:answer + 5]) == str(key)
            assert "The pass key is %d. Remember it." % key in text
            assert "What is the pass key? The pass key is %d." % key in text
        end = answers[-1] + 6                  # after the last example's "."
        assert 200 - end < maker.shortest      # no room was left for another example


def test_curriculum_grows_the_longest_example_to_the_context():
    s = _settings(steps=100, context=256, passkey_curriculum=64)
    longest = [trainer.longest_passkey(i, s) for i in range(100)]
    assert longest[0] == 64 and longest[50] == 256 and longest[99] == 256
    assert all(a <= b for a, b in zip(longest, longest[1:]))
    assert trainer.longest_passkey(0, _settings(context=256)) == 256


def test_passkey_flags_reach_the_settings():
    import train
    args = train.parse_args(["--passkey-fraction", "0.5", "--passkey-pack", "--passkey-curriculum", "64",
                             "--passkey-answer-weight", "30"])
    assert (args.passkey_pack, args.passkey_curriculum, args.passkey_answer_weight) == (True, 64, 30.0)
    plain = train.parse_args([])
    assert (plain.passkey_pack, plain.passkey_curriculum, plain.passkey_answer_weight) == (False, None, 1.0)


def test_curriculum_end_sets_where_the_ramp_reaches_the_context():
    s = _settings(steps=100, context=256, passkey_curriculum=40, passkey_curriculum_end=0.8)
    longest = [trainer.longest_passkey(i, s) for i in range(100)]
    assert longest[0] == 40 and longest[40] == 40 + 108 and longest[79] < 256 and longest[80] == 256
