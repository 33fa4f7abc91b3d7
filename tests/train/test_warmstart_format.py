"""The format-only warm start's loss mask: the last supervised line, without digit tokens."""

import numpy as np

from grpo_jax.train import warmstart


def test_format_mask_keeps_the_answer_line_without_digits():
  # Token ids: 0 pad, 1-3 digits, 4 newline, 5 words, 6 end token.
  digit_V = np.array([0, 1, 1, 1, 0, 0, 0], bool)
  newline_V = np.array([0, 0, 0, 0, 1, 0, 0], bool)
  tokens_BxL = np.array(
    [
      [0, 0, 1, 5, 2, 4, 5, 5, 3, 5, 6],  # prompt | "1 w 2 \n w w 3 w <end>"
      [0, 4, 5, 2, 5, 6, 0, 0, 0, 0, 0],  # a newline in the prompt only: the whole solution
    ]
  )
  loss_mask_BxL = np.array(
    [
      [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1],
      [0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0],
    ]
  )
  mask = warmstart.format_mask(tokens_BxL, loss_mask_BxL, digit_V, newline_V)
  np.testing.assert_array_equal(mask[0], [0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1])
  np.testing.assert_array_equal(mask[1], [0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0])
  assert mask.dtype == loss_mask_BxL.dtype


def test_token_classes_on_a_character_tokenizer():
  from grpo_jax.data.tokenizer import build_tokenizer

  tok = build_tokenizer("0123456789+=\n")
  digit_V, newline_V = warmstart.token_classes(tok)
  ids = tok("7+\n", add_special_tokens=False)["input_ids"]
  assert digit_V[ids].tolist() == [True, False, False]
  assert newline_V[ids].tolist() == [False, False, True]
  assert digit_V.sum() == 10 and newline_V.sum() == 1
