"""--reinit-digit-embeddings: exactly the ten digit rows are redrawn (after --init-from), and
nearly identical digit embeddings become distinguishable."""

import os

import sentencepiece as spm
import torch

import digit_embeddings
import export_model
import train

FIXTURE_TOKENIZER = os.path.join(os.path.dirname(digit_embeddings.__file__), "..", "..", "tests", "data",
                                 "tokenizer.model")
FLAGS = ["--hidden", "32", "--layers", "1", "--heads", "2", "--head-dim", "8", "--chunk", "16"]


def test_digit_ids_are_the_byte_pieces():
    sp = spm.SentencePieceProcessor(model_file=FIXTURE_TOKENIZER)
    ids = digit_embeddings.digit_ids(sp)
    assert [sp.id_to_piece(i) for i in ids] == ["<0x%02X>" % (0x30 + d) for d in range(10)]
    assert sp.decode(ids) == "0123456789"


def test_only_the_digit_rows_are_redrawn_after_init_from(tmp_path):
    sp = spm.SentencePieceProcessor(model_file=FIXTURE_TOKENIZER)
    ids = digit_embeddings.digit_ids(sp)
    saved = train.build_model(train.parse_args(FLAGS), 320)
    with torch.no_grad():   # collapse the digits as KJV training does: one shared direction
        saved.model.embeddings.weight[ids] = torch.ones(32) + 0.01 * torch.randn(10, 32)
    export_model.export(saved, FIXTURE_TOKENIZER, str(tmp_path / "m"))
    assert digit_embeddings.mean_pairwise_cosine(saved, ids) > 0.99
    model = train.build_model(train.parse_args(FLAGS + ["--seed", "9", "--init-from", str(tmp_path / "m"),
                                                        "--reinit-digit-embeddings"]), 320, FIXTURE_TOKENIZER, sp)
    before, after = saved.model.embeddings.weight.detach(), model.model.embeddings.weight.detach()
    changed = [i for i in range(320) if not torch.equal(before[i], after[i])]
    assert changed == sorted(ids)
    assert abs(digit_embeddings.mean_pairwise_cosine(model, ids)) < 0.3
    assert 0.01 < float(after[ids].std()) < 0.03   # N(0, initializer_range² = 0.02²)
    for name, p in saved.state_dict().items():
        if name != "model.embeddings.weight":
            assert torch.equal(model.state_dict()[name], p), name
