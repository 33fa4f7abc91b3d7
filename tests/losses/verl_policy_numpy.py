"""verl's CISPO, SAPO, GMPO, Clip-Cov and KL-Cov policy losses in NumPy, written from
``verl/trainer/ppo/core_algos.py`` (``compute_policy_loss_cispo``, ``compute_policy_loss_sapo``,
``compute_policy_loss_geo_mean``, ``compute_policy_loss_clip_cov``,
``compute_policy_loss_kl_cov`` and ``agg_loss``), independently of ``grpo_jax.losses``: an oracle
for its tests. Inputs are [N, T] arrays with per-token advantages, as verl takes them; float64.

Where verl's value depends on a stop-gradient factor, ``*_w`` arguments give the array the factor
is computed from (by default the log-probs themselves), so central differences of the value in
``log_prob`` with that factor held give the gradient torch's autograd computes. Clip-Cov's random
choice is verl's ``torch.randperm`` over the candidates in row-major order: ``perm`` (a
permutation of the candidates, default the identity) stands for it.
"""

from __future__ import annotations

import numpy as np


def masked_mean(x, mask):
  return (x * mask).sum() / mask.sum()


def agg_loss(loss_mat, mask, mode):
  """verl's ``agg_loss`` on one batch (no data parallelism)."""
  if mode == "token-mean":
    return (loss_mat * mask).sum() / mask.sum()
  if mode == "seq-mean-token-mean":
    n = mask.sum(-1)
    seq = (loss_mat * mask).sum(-1) / (n + 1e-8)
    keep = (n > 0).astype(np.float64)
    return (seq * keep).sum() / keep.sum()
  raise ValueError(mode)


def cispo(old_log_prob, log_prob, advantages, mask, clip_low, clip_high, mode, weight_from=None):
  """(pg_loss, pg_clipfrac). ``weight_from``: the log-probs the detached clipped ratio reads."""
  w_lp = log_prob if weight_from is None else weight_from
  ratio = np.exp(np.clip(w_lp - old_log_prob, -20.0, 20.0))
  clipped = np.clip(ratio, 1 - clip_low, 1 + clip_high)
  pg_losses = -clipped * advantages * log_prob
  return agg_loss(pg_losses, mask, mode), masked_mean((ratio != clipped).astype(float), mask)


def sapo(old_log_prob, log_prob, advantages, mask, tau_pos, tau_neg):
  """pg_loss; verl always aggregates SAPO as seq-mean-token-mean."""
  ratio = np.exp(np.clip(log_prob - old_log_prob, -20.0, 20.0))
  taus = np.where(advantages > 0, tau_pos, tau_neg)
  gates = 1.0 / (1.0 + np.exp(-taus * (ratio - 1.0))) * (4.0 / taus)
  return agg_loss(-gates * advantages, mask, "seq-mean-token-mean")


def geo_mean(old_log_prob, log_prob, advantages, mask, clip_low, clip_high):
  """(pg_loss, pg_clipfrac, pg_clipfrac_lower): the mean over rows of −A_i·R_i."""
  nkl = log_prob - old_log_prob
  sgn = np.sign(advantages)
  nkl_clamp = np.clip(nkl, -clip_low, clip_high)
  nkl_min = sgn * np.minimum(sgn * nkl, sgn * nkl_clamp)
  n = mask.sum(-1)
  ratio = np.exp((nkl_min * mask).sum(-1) / (n + 1e-8))
  advantage = (advantages * mask).sum(-1) / (n + 1e-8)
  pg_loss = np.mean(-advantage * ratio)
  clipped = nkl != nkl_clamp
  return (
    pg_loss,
    masked_mean((clipped & (advantages > 0)).astype(float), mask),
    masked_mean((clipped & (advantages < 0)).astype(float), mask),
  )


def clip_cov_corr(
  old_log_prob, log_prob, advantages, mask, clip_low, clip_high, ratio_k, lb, ub, perm=None
):
  """(corr, candidates): verl's ``corr`` (0 on the chosen tokens) and the candidate mask."""
  ratio = np.exp(log_prob - old_log_prob)
  pg1 = -advantages * ratio
  pg2 = -advantages * np.clip(ratio, 1 - clip_low, 1 + clip_high)
  clip_by_origin = (pg2 > pg1) & (mask > 0)
  cov = (advantages - masked_mean(advantages, mask)) * (log_prob - masked_mean(log_prob, mask))
  cov = np.where(mask == 0, -np.inf, cov)
  cov = np.where(clip_by_origin, -np.inf, cov)
  clip_num = max(int(ratio_k * mask.sum()), 1)
  candidates = (cov < ub) & (cov > lb) & (mask > 0)
  idx = np.argwhere(candidates)
  if len(idx):
    order = np.arange(len(idx)) if perm is None else np.asarray(perm)
    idx = idx[order[: min(clip_num, len(idx))]]
  corr = np.ones_like(advantages)
  corr[idx[:, 0], idx[:, 1]] = 0
  return corr, candidates


def clip_cov(old_log_prob, log_prob, advantages, mask, clip_low, clip_high, corr, mode):
  """(pg_loss, pg_clipfrac) given ``corr`` (:func:`clip_cov_corr`, a constant)."""
  ratio = np.exp(log_prob - old_log_prob)
  pg1 = -advantages * ratio
  pg2 = -advantages * np.clip(ratio, 1 - clip_low, 1 + clip_high)
  pg_losses = np.maximum(pg1, pg2) * corr
  return agg_loss(pg_losses, mask, mode), masked_mean((corr == 0).astype(float), mask)


def kl_cov_index(log_prob, advantages, mask, ratio_k):
  """The flat indices verl's KL-Cov penalises (``torch.topk`` of the covariance)."""
  valid_idx = np.flatnonzero(mask.reshape(-1) > 0)
  adv = advantages[mask > 0].reshape(-1)
  lp = log_prob[mask > 0].reshape(-1)
  cov = (adv - adv.mean()) * (lp - lp.mean())
  k = max(1, int(len(cov) * ratio_k))
  return valid_idx[np.argsort(-cov, kind="stable")[:k]]


def kl_cov(old_log_prob, log_prob, advantages, mask, index, coef, mode):
  """pg_loss given the penalised flat ``index`` (:func:`kl_cov_index`, a constant): −A·ρ
  everywhere (no clip), + coef·|log ρ| on the penalised tokens."""
  nkl = log_prob - old_log_prob
  ratio = np.exp(nkl)
  pg_losses = (-advantages * ratio).reshape(-1)
  pg_kl = (-advantages * ratio + coef * np.abs(nkl)).reshape(-1)
  pg_losses[index] = pg_kl[index]
  return agg_loss(pg_losses.reshape(mask.shape), mask, mode)


def central_differences(f, logp, mask, h=1e-6):
  """The gradient of the float64 scalar ``f`` at ``logp`` by central differences, on masked-in
  entries (0 elsewhere): what a verl function's value gives to compare gradients with."""
  grad = np.zeros_like(logp)
  for i, t in zip(*np.nonzero(mask)):
    up, dn = logp.copy(), logp.copy()
    up[i, t] += h
    dn[i, t] -= h
    grad[i, t] = (f(up) - f(dn)) / (2 * h)
  return grad
