"""The worker's cutting of text before the model: no piece makes more phonemes than the bound, the
pieces are all of the text in order, and they are cut at spaces when there are any. Piper's memory
grows with the frames of one model run, so this bound is what holds a worker's peak."""

import importlib.util
import pathlib
import unittest

HERE = pathlib.Path(__file__).resolve().parent
_specification = importlib.util.spec_from_file_location(
    "speakd_piper_worker", HERE.parent / "speakd-piper-worker.py")
worker = importlib.util.module_from_spec(_specification)
_specification.loader.exec_module(worker)

try:
    from piper.phonemize_espeak import EspeakPhonemizer
except ImportError:  # pragma: no cover - the system python3 without piper-tts
    EspeakPhonemizer = None

WORDS = ["platform", "gate", "train", "station", "ticket", "window", "departure", "arrival", "coach"]


def letters_phonemes(text):
    """A stand-in phonemiser: three phonemes a letter or digit, one a mark, none a space."""
    return sum(0 if character.isspace() else 3 if character.isalnum() else 1 for character in text)


def capped(count, cap):
    """`count`, but keeping at most `cap` phonemes of each word, as espeak-ng drops a long word's end."""
    return lambda text: sum(min(count(word), cap) for word in text.split())


def pieces_of(text, count, limit, first=False):
    return [
        cut
        for offset, piece in worker.split_sentences(text, first=first)
        for cut in worker.cut_by_phonemes(offset, piece, count, limit)
    ]


class CuttingTests(unittest.TestCase):
    def assert_whole(self, text, pieces):
        """The pieces are the text's, in order, each at its offset, together all of it."""
        position = 0
        for offset, piece in pieces:
            self.assertEqual(text[offset : offset + len(piece)], piece)
            self.assertGreaterEqual(offset, position)
            # Only whitespace between pieces (split_sentences drops it after a sentence's end).
            self.assertEqual(text[position:offset].strip(), "")
            position = offset + len(piece)
        self.assertEqual(text[position:].strip(), "")
        self.assertEqual("".join(text[offset : offset + len(piece)] for offset, piece in pieces),
                         "".join(piece for _, piece in pieces))

    def test_no_piece_is_over_the_bound(self):
        digits = "".join(str((index * 7 + index // 3) % 10) for index in range(5_000))
        word = "".join("abcdefghijklmnopqrstuvwxyz"[(index * 7 + index // 3) % 26] for index in range(5_000))
        marks = "".join(("\u200e" if index % 3 else "\u200f") if index % 2 else str(index % 10) for index in range(5_000))
        words = " ".join(WORDS[(index * 7 + index // 3) % 9] for index in range(700))[:5_000]
        for name, text in [("digits", digits), ("word", word), ("marks", marks), ("words", words)]:
            for limit in (200, 100, 7):
                with self.subTest(text=name, limit=limit):
                    pieces = pieces_of(text, letters_phonemes, limit, first=True)
                    self.assertTrue(all(letters_phonemes(piece) <= limit for _, piece in pieces))
                    self.assert_whole(text, pieces)
                    # Halving never makes a piece of less than a quarter of the bound, but for a
                    # sentence's own end: a bound of 200 gives 200/3 characters, not single ones.
                    self.assertLess(len(pieces), 4 * letters_phonemes(text) / limit + 30)

    def test_a_piece_of_one_character_is_never_cut(self):
        self.assertEqual(worker.cut_by_phonemes(4, "7", letters_phonemes, 1), [(4, "7")])

    def test_pieces_under_the_bound_are_left_whole(self):
        text = "Gate twelve is now boarding, please have your ticket ready"
        self.assertEqual(worker.cut_by_phonemes(0, text, letters_phonemes, 200), [(0, text)])

    def test_cut_at_spaces_when_there_are_any(self):
        text = " ".join(WORDS[(index * 5) % 9] for index in range(120))
        pieces = worker.cut_by_phonemes(0, text, letters_phonemes, 60)
        self.assertGreater(len(pieces), 10)
        self.assert_whole(text, pieces)
        for offset, piece in pieces[:-1]:
            # Each piece ends after a space: no word is cut.
            self.assertTrue(piece.endswith(" "), repr(piece))
            self.assertTrue(text[offset + len(piece)].isalpha())

    def test_a_clause_mark_near_the_middle_comes_before_a_space(self):
        text = "the next train to the airport, leaves from platform two in four minutes"
        self.assertEqual(text[: worker.cut_near_middle(text)], "the next train to the airport,")

    def test_a_word_without_spaces_is_cut_anywhere_but_inside_a_character(self):
        word = "e\u0301" * 300  # e and a combining acute accent: one character each pair
        pieces = worker.cut_by_phonemes(0, word, letters_phonemes, 50)
        self.assert_whole(word, pieces)
        self.assertGreater(len(pieces), 10)
        for _, piece in pieces:
            self.assertLessEqual(letters_phonemes(piece), 50)
            self.assertEqual(piece[0], "e", repr(piece))

    def test_a_word_whose_end_the_phonemiser_drops_is_cut_until_all_is_said(self):
        # Under the bound as counted, since the phonemiser keeps only 150 phonemes of a word.
        count = capped(letters_phonemes, 150)
        word = "7" * 400
        pieces = worker.cut_by_phonemes(0, word, count, 200)
        self.assert_whole(word, pieces)
        self.assertGreater(len(pieces), 1)
        self.assertEqual(sum(count(piece) for _, piece in pieces), letters_phonemes(word))
        # Words it keeps whole are not cut.
        text = " ".join(WORDS * 3)
        self.assertEqual(worker.cut_by_phonemes(0, text, count, 1_000), [(0, text)])

    def test_the_bound_falls_as_the_rate_slows(self):
        self.assertEqual(worker.phoneme_bound(1.0), worker.MAX_PHONEMES)
        self.assertEqual(worker.phoneme_bound(0.5), worker.MAX_PHONEMES)  # faster: fewer frames
        self.assertEqual(worker.phoneme_bound(2.0), worker.MAX_PHONEMES // 2)
        self.assertEqual(worker.MAX_PHONEMES, 200)

    @unittest.skipIf(EspeakPhonemizer is None, "piper-tts is not installed for this python3 (the Piper venv has it)")
    def test_the_issues_texts_with_the_voices_phonemiser(self):
        phonemizer = EspeakPhonemizer()

        def count(text):
            return sum(len(sentence) for sentence in phonemizer.phonemize("en-us", text))

        digits = "".join(str((index * 7 + index // 3) % 10) for index in range(1_000))
        word = "".join("abcdefghijklmnopqrstuvwxyz"[(index * 7 + index // 3) % 26] for index in range(1_000))
        marks = "".join(("\u200e" if index % 3 else "\u200f") if index % 2 else str(index % 10) for index in range(1_000))
        for name, text in [("digits", digits), ("word", word), ("marks", marks)]:
            for scale in (1.0, 2.0):
                with self.subTest(text=name, scale=scale):
                    limit = worker.phoneme_bound(scale)
                    pieces = pieces_of(text, count, limit, first=True)
                    self.assert_whole(text, pieces)
                    self.assertTrue(all(count(piece) <= limit for _, piece in pieces))
        # All of the digits are said: espeak-ng said about 60 of 1,000 in one word (210 phonemes).
        said = sum(count(piece) for _, piece in pieces_of(digits, count, 200))
        self.assertGreater(said, 3 * len(digits))


if __name__ == "__main__":
    unittest.main()
