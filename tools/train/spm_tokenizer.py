"""SentencePiece tokenizer for the trained model, with the conventions the engine expects
(engine/model/tokenizer.*, tests/reference/README.md "Tokenizer"): unk 0, <s> 1, </s> 2,
byte_fallback (every byte is a piece, so any text encodes), identity normalizer, dummy prefix,
whitespace kept as is, digits split. Training is deterministic: BPE draws no random numbers
once every sentence is loaded (input_sentence_size 0, no shuffling), and it runs on one thread.
"""

import io
import os

import sentencepiece as spm

DEFAULT_VOCAB = 4096


def trainer_options(vocab_size):
    """Keyword options of SentencePieceTrainer.train (everything but the input)."""
    return dict(model_type="bpe", vocab_size=vocab_size, byte_fallback=True, character_coverage=1.0,
                unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                normalization_rule_name="identity", add_dummy_prefix=True,
                remove_extra_whitespaces=False, split_digits=True,
                num_threads=1, shuffle_input_sentence=False,
                input_sentence_size=0, max_sentence_length=16384, minloglevel=2)


def train(corpus_path, model_path, vocab_size=DEFAULT_VOCAB):
    """Trains on `corpus_path` (one sentence per line) and writes the model to `model_path`."""
    if not os.path.isfile(corpus_path):
        raise FileNotFoundError("tokenizer corpus %s does not exist" % corpus_path)
    with open(corpus_path, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    buf = io.BytesIO()
    # sentences are passed as an iterator so the model does not record the corpus path
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=buf,
                                   **trainer_options(vocab_size))
    with open(model_path, "wb") as f:
        f.write(buf.getvalue())
    return model_path


def load(model_path):
    """A SentencePieceProcessor for `model_path`, checked for the special ids the engine uses."""
    sp = spm.SentencePieceProcessor(model_file=model_path)
    if (sp.unk_id(), sp.bos_id(), sp.eos_id()) != (0, 1, 2):
        raise ValueError("%s: special ids (unk, bos, eos) = %s, expected (0, 1, 2)"
                         % (model_path, (sp.unk_id(), sp.bos_id(), sp.eos_id())))
    return sp


def encode_text(sp, text):
    """Token ids of a whole text (newlines become the byte piece <0x0A>), no BOS; the same ids as
    the engine's Tokenizer::Encode(text, add_bos=false) since both run libsentencepiece."""
    return list(sp.encode(text))
