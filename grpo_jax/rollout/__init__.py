"""What turns prompts into a scored batch: the rollout kinds, their batch and DAPO's shaping.

  protocols.py         ``Task`` (what a rollout needs from a task) and ``Rollout``
  batch.py             ``RolloutBatch``: the host-side N-row batch every rollout returns, and
                       ``UpdateBatch``, the arrays the jitted update reads
  registry.py          ``ROLLOUTS``: the rollout kinds by name, and the run's kind
  one_stage.py         the one-stage (plain GRPO) rollout
  two_stage.py         the two-stage rollout of the strategy method (``grpo_jax.strategy``)
  dynamic_sampling.py  DAPO's dynamic sampling and overlong shaping around any rollout
  multihost.py         a multi-host job: each process's share of the prompts (job-wide ids)
                       and the exchange of a round's rows

The package sits below ``train`` (which runs it) and above ``strategy`` and ``sampling``
(which it uses).
"""
