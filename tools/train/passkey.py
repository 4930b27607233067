"""Passkey training examples (issue 7 item 4), mixed into training windows on request.

An example is, as text:
    The pass key is 68213. Remember it. <filler> What is the pass key? The pass key is 68213.
with a random 5-digit key and filler taken from the training stream. It is assembled from token
ids: encode(intro) + filler tokens + encode(question): the filler starts at a word-initial piece
(one beginning with "▁"), so the ids equal encoding the joined text up to where the filler is cut.
The example's total length is uniform in [shortest possible, context]; the window is then filled
up to `context` tokens with training text that follows another random word start, so every
window keeps the training context length and the answer sits at any depth up to it.
`answer` is the index in the window of the question's first key digit: the 5 answer targets are
window[answer:answer + 5] (targets are the window itself, windows.model_inputs).

Options for the trainer: `longest` caps an example's length (a length curriculum), and `packed`
fills a window with examples back to back (more answers per window; the second and later
examples follow other text, as the needle does at depth > 0 in mcserve-eval's prompts).
"""

import torch

INTRO = "The pass key is {key}. Remember it."
QUESTION = "What is the pass key? The pass key is {key}."
KEY_DIGITS = 5   # keys are 10000..99999, one token per digit


class PasskeyMaker:
    """Builds passkey windows from a training stream; deterministic given the generator.
    One instance per training run; not thread-safe."""

    def __init__(self, sp, stream, context):
        self.sp = sp
        self.stream = stream
        self.context = context
        word_start = torch.tensor([sp.id_to_piece(i).startswith("\u2581") for i in range(sp.get_piece_size())])
        self.word_starts = torch.nonzero(word_start[stream]).flatten()
        fixed = len(self._ids(INTRO, 10000)) + len(self._ids(QUESTION, 10000))
        self.shortest = fixed + 1   # every key has 5 digits, so every example's template is this long
        if fixed + 1 > context:
            raise ValueError("context %d too short for a passkey example (needs > %d tokens)" % (context, fixed))

    def _ids(self, template, key):
        """Token ids of `template` with `key` filled in."""
        return list(self.sp.encode(template.format(key=key)))

    def _text_from(self, n, generator):
        """n stream tokens following a random word start."""
        usable = self.word_starts[self.word_starts <= self.stream.numel() - n]
        s = int(usable[torch.randint(0, usable.numel(), (1,), generator=generator)])
        return self.stream[s:s + n].tolist()

    def _key_digits_at(self, ids, key):
        """Index of the last occurrence of the key's 5 digit pieces in ids (ValueError if absent)."""
        digits = [self.sp.piece_to_id("<0x%02X>" % ord(c)) for c in str(key)]
        assert len(digits) == KEY_DIGITS
        for i in range(len(ids) - len(digits), -1, -1):
            if ids[i:i + len(digits)] == digits:
                return i
        raise ValueError("key %d's digits not found in %r" % (key, ids))

    def _one(self, generator, longest):
        """One example of uniform length in [shortest, longest]: (ids, key, index of its answer)."""
        key = int(torch.randint(10000, 100000, (1,), generator=generator))
        intro, question = self._ids(INTRO, key), self._ids(QUESTION, key)
        shortest = len(intro) + len(question) + 1
        length = int(torch.randint(shortest, max(shortest, longest) + 1, (1,), generator=generator))
        filler = self._text_from(length - len(intro) - len(question), generator)
        return intro + filler + question, key, len(intro) + len(filler) + self._key_digits_at(question, key)

    def _fill(self, ids, generator):
        """ids completed to `context` tokens with training text."""
        return ids + (self._text_from(self.context - len(ids), generator) if len(ids) < self.context else [])

    def example(self, generator, longest=None):
        """One window of `context` ids: a passkey example (at most `longest` tokens, default the
        context) then ordinary text. Returns (ids, key, answer) with answer the index of the
        question's first key digit."""
        ids, key, answer = self._one(generator, min(longest or self.context, self.context))
        return self._fill(ids, generator), key, answer

    def packed(self, generator, longest=None):
        """One window of `context` ids holding passkey examples back to back (each at most
        `longest` tokens and what is left of the window) while one more fits, then ordinary text.
        Returns (ids, keys, answers)."""
        ids, keys, answers = [], [], []
        while self.context - len(ids) >= self.shortest:
            one, key, answer = self._one(generator, min(longest or self.context, self.context - len(ids)))
            answers.append(len(ids) + answer)
            keys.append(key)
            ids += one
        return self._fill(ids, generator), keys, answers

    def window(self, generator):
        """One window of `context` ids: a passkey example then ordinary text. Returns (ids, key)."""
        ids, key, _ = self.example(generator)
        return ids, key
