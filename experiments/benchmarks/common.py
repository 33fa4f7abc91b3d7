"""Shared pieces of the benchmarks: the machine's matmul ceiling, the two local HF checkpoints,
best-of-n timing, model FLOP counts and a compile counter.

The checkpoints are random Qwen3-architecture models written by transformers (torch CPU, a
``bench``/``dev`` dependency only), so ``generate``/TRL and grpo_jax read the same weights:

  tiny:  vocab 1024, hidden 128, 4 layers, 4 heads, 2 KV heads, MLP 384
  small: vocab 4096, hidden 512, 8 layers, 8 heads, 4 KV heads, MLP 1408

Their tokenizer is a word-level one over "t0 … t{V-1}" (t0 = pad, t1 = eos), so a prompt of P
words is exactly P tokens in both worlds.

``--model real`` is SmolLM2-135M-Instruct (``grpo_jax.models.smollm2``), or any HF directory:
``model_dir`` finds it, ``register`` adds its shapes to ``SIZES`` (for the FLOP counts and
bounds) and ``chat_prompts`` gives the arithmetic task's chat prompts
(``configs/smollm2_arithmetic.py``) as the library's sampler takes them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax.models import smollm2
from grpo_jax.rundir import tables

SIZES = {
  "tiny": dict(vocab=1024, hidden=128, layers=4, heads=4, kv_heads=2, mlp=384),
  "small": dict(vocab=4096, hidden=512, layers=8, heads=8, kv_heads=4, mlp=1408),
}
PAD_ID, EOS_ID = 0, 1
CKPT_ROOT = pathlib.Path(os.environ.get("GRPO_BENCH_DIR", "/tmp/grpo_jax_bench"))
ROOT = pathlib.Path(__file__).resolve().parents[2]


def model_dir(name: str) -> str:
  """``real``: SmolLM2-135M-Instruct as a HF directory (built once by ``grpo_jax.models.smollm2``);
  ``tiny`` / ``small``: the random checkpoints below; else a HF directory."""
  if name == "real":
    return str(smollm2.hf_dir())
  return str(checkpoint(name)) if name in SIZES else name


def register(name: str) -> str:
  """The ``SIZES`` key of ``name`` (``tiny``, ``small``, ``real`` or a HF directory), its shapes
  read from the directory's ``config.json`` the first time."""
  if name not in SIZES:
    c = json.loads((pathlib.Path(model_dir(name)) / "config.json").read_text())
    assert c.get("head_dim", c["hidden_size"] // c["num_attention_heads"]) == (
      c["hidden_size"] // c["num_attention_heads"]
    ), "the FLOP counts assume head_dim = hidden / heads"
    SIZES[name] = dict(
      vocab=c["vocab_size"],
      hidden=c["hidden_size"],
      layers=c["num_hidden_layers"],
      heads=c["num_attention_heads"],
      kv_heads=c["num_key_value_heads"],
      mlp=c["intermediate_size"],
    )
  return name


def chat_prompts(name: str, n: int, start: int = 0) -> dict:
  """The arithmetic task's prompts ``start .. start + n`` on the model ``name``: the chat
  template around each problem, tokenized by the model's own tokenizer, left-padded to the
  config's prompt slots (``data.max_prompt_tokens``) as the library's sampler takes them.

  Returns ``prompts_BxP``, ``mask_BxP`` (int32, 1 = token), ``pad_id``, ``texts`` (each
  prompt's ids decoded back, special tokens kept: the same ids when tokenized without adding
  any) and ``tokenizer``."""
  from grpo_jax import data
  from grpo_jax.config import files as config_file

  cfg = config_file.load(
    f"{ROOT}/configs/smollm2_arithmetic.py:hf_path={model_dir(name)},warmstart=0",
    ["strategy.enabled=false", "advantage.baseline=group", "hadw.enabled=false"],
  )
  task = data.build_task(cfg)
  prompts_BxP, mask_BxP = task.encode_prompts(task.train_problems(start, n))
  tok = task.tokenizer
  texts = [tok.decode(p[m > 0].tolist()) for p, m in zip(prompts_BxP, mask_BxP)]
  return dict(
    prompts_BxP=prompts_BxP, mask_BxP=mask_BxP, pad_id=task.pad_id, texts=texts, tokenizer=tok
  )


def machine() -> dict:
  return {
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "cores": os.cpu_count(),
    "load_avg_1m": os.getloadavg()[0],
    "cpu": platform.processor() or platform.machine(),
    "jax": jax.__version__,
    "backend": jax.default_backend(),
    "devices": len(jax.devices()),
  }


def best_of(fn, n: int = 3) -> float:
  """Minimum wall time of n calls (the least-disturbed run on a shared machine); ``fn`` must
  block until its result is ready."""
  times = []
  for _ in range(n):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return min(times)


def matmul_ceiling(sizes=(1024, 2048), n: int = 5) -> dict:
  """The machine's dense fp32 matmul rate: best-of-n of a jitted n×n @ n×n, best size.

  Returns GFLOP/s (2·n³ FLOPs per product) per size and the maximum, ``gflops``."""
  out = {}
  for size in sizes:
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
    f = jax.jit(lambda x, y: x @ y)
    f(a, b).block_until_ready()
    t = best_of(lambda f=f, a=a, b=b: f(a, b).block_until_ready(), n)
    out[f"jax_{size}"] = 2 * size**3 / t / 1e9
  out["gflops"] = max(out.values())
  return out


def torch_matmul_gflops(size: int = 1024, n: int = 5) -> float:
  """The same product in torch (fp32, its default threads): transformers' own ceiling."""
  import torch

  a, b = torch.randn(size, size), torch.randn(size, size)
  a @ b
  return 2 * size**3 / best_of(lambda: a @ b, n) / 1e9


def set_torch_threads(n: int) -> int:
  """torch's intra-op threads; 0 keeps its default (one per core). On a machine shared with
  other jobs, one thread was 4-5× faster for ``generate`` than two (spinning OpenMP workers
  that lose their core); the benchmarks give torch that best setting."""
  try:
    import torch
  except ImportError:  # the TRL / transformers side is optional (the ``bench`` extra)
    return 0
  if n > 0:
    torch.set_num_threads(n)
  return torch.get_num_threads()


def set_cpu_devices(n: int) -> None:
  """Exposes ``n`` CPU devices (``jax_num_cpu_devices``; before anything starts jax's backend),
  so that a mesh over them runs each device's share of the rows on its own core; 0 keeps
  jax's default of one CPU device that parallelises inside each op. ``machine()`` reports the
  resulting device count (on an accelerator, that of the accelerator)."""
  if n > 0:
    jax.config.update("jax_num_cpu_devices", n)


def mesh():
  """The library's default mesh (every device on the data axis) over ``jax.devices()``."""
  from grpo_jax import config, sharding

  return sharding.make_mesh(config.defaults().mesh)


def make_tokenizer(vocab: int):
  """A word-level fast tokenizer over "t0 … t{V-1}" (one word = one token)."""
  from tokenizers import Tokenizer, models, pre_tokenizers
  from transformers import PreTrainedTokenizerFast

  tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t2"))
  tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  return PreTrainedTokenizerFast(
    tokenizer_object=tok, pad_token="t0", eos_token="t1", unk_token="t2"
  )


def checkpoint(name: str, seed: int = 0) -> pathlib.Path:
  """Writes (once) and returns the HF checkpoint directory of size ``name``."""
  path = CKPT_ROOT / name
  if (path / "config.json").exists():
    return path
  import torch
  import transformers

  s = SIZES[name]
  torch.manual_seed(seed)
  cfg = transformers.Qwen3Config(
    vocab_size=s["vocab"],
    hidden_size=s["hidden"],
    intermediate_size=s["mlp"],
    num_hidden_layers=s["layers"],
    num_attention_heads=s["heads"],
    num_key_value_heads=s["kv_heads"],
    head_dim=s["hidden"] // s["heads"],
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    bos_token_id=EOS_ID,
    eos_token_id=EOS_ID,
    pad_token_id=PAD_ID,
  )
  model = transformers.Qwen3ForCausalLM(cfg).eval()
  path.mkdir(parents=True, exist_ok=True)
  model.save_pretrained(str(path))
  make_tokenizer(s["vocab"]).save_pretrained(str(path))
  return path


def random_prompts(n: int, length: int, vocab: int, seed: int = 0) -> np.ndarray:
  """Prompt ids in [3, V): never pad, eos or unk."""
  return np.random.default_rng(seed).integers(3, vocab, (n, length)).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class Flops:
  """Matmul FLOPs per token of a decoder (2 per multiply-add; norms/softmax ignored)."""

  dense: float  # projections + MLP, per token
  unembed: float  # lm_head, per token that is unembedded
  attn_per_key: float  # q·k and p·v, per (query, visible key) pair

  def forward(self, tokens: float, unembedded: float, key_pairs: float) -> float:
    return self.dense * tokens + self.unembed * unembedded + self.attn_per_key * key_pairs


def flops_of(name: str) -> Flops:
  s = SIZES[name]
  D, F, H, Hk, L = s["hidden"], s["mlp"], s["heads"], s["kv_heads"], s["layers"]
  Dh = D // H
  per_layer = 2 * (D * H * Dh * 2 + D * Hk * Dh * 2 + 3 * D * F)
  return Flops(dense=L * per_layer, unembed=2 * D * s["vocab"], attn_per_key=L * 4 * H * Dh)


def causal_pairs(prompt: int, total: int) -> float:
  """Σ over positions of visible keys for one row of ``total`` tokens (causal)."""
  return total * (total + 1) / 2


class CompileCounter:
  """Counts XLA compilations while active: jax's backend-compile monitoring event, which jax
  fires around the persistent compilation cache's lookup too, so a program read back from the
  cache counts as one."""

  EVENT = "/jax/core/compile/backend_compile_duration"

  def __init__(self):
    self.count = 0
    jax.monitoring.register_event_duration_secs_listener(self._on_event)

  def _on_event(self, event: str, duration: float, **kwargs) -> None:
    if event == self.EVENT:
      self.count += 1


def fmt_table(rows: list[dict], cols: list[str]) -> str:
  """A markdown table of ``rows`` (floats to 3 significant figures)."""

  def cell(v):
    if isinstance(v, float):
      return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)

  return tables.markdown(cols, ([cell(r.get(c, "")) for c in cols] for r in rows))
