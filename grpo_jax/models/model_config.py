"""The decoder's hyper-parameters (Qwen3 / Llama-3 / OLMo-3 families) and named presets.

Field names follow the experiment config's ``model`` group; the Hugging Face ``Qwen3Config``
equivalents are: hidden_dim = hidden_size, num_layers = num_hidden_layers, num_heads =
num_attention_heads, num_kv_heads = num_key_value_heads, mlp_dim = intermediate_size,
norm_eps = rms_norm_eps, tie_embeddings = tie_word_embeddings. ``rope_scaling`` holds HF's
``rope_parameters`` (less ``rope_theta``) as sorted (key, value) pairs so the config stays hashable;
with ``layer_types`` it applies to the "full_attention" layers and ``sliding_rope_scaling`` /
``sliding_rope_theta`` to the "sliding_attention" ones (OLMo-3 scales only its full layers).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from grpo_jax.models import remat as remat_lib
from grpo_jax.models.families import FAMILIES

LAYER_TYPES = ("full_attention", "sliding_attention")
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Shape and numerics of a decoder-only transformer; frozen so it can be a static jit arg."""

  vocab_size: int
  hidden_dim: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  mlp_dim: int
  rope_theta: float = 10_000.0
  norm_eps: float = 1e-6
  tie_embeddings: bool = True
  dtype: str = "float32"  # compute dtype of activations and matmuls
  param_dtype: str = "float32"  # storage dtype of the parameters
  family: str = "qwen3"  # qwen3 | llama | olmo3 (families.py)
  rope_scaling: tuple = ()  # sorted (key, value) pairs; () = default rope
  sliding_window: int = 0  # W: a sliding layer's query at slot q sees keys q-W < k <= q
  layer_types: tuple = ()  # per layer "full_attention" | "sliding_attention"; () = all full
  sliding_rope_theta: float = 0.0  # 0 = rope_theta
  sliding_rope_scaling: tuple = ()
  attention_bias: bool = False  # biases on q/k/v/o projections
  mlp_bias: bool = False  # biases on gate/up/down (Llama's mlp_bias)
  max_position_embeddings: int = 32_768  # only recorded (written back to config.json)
  # Rematerialisation of each decoder layer in the backward pass (remat.py): none | full |
  # dots_saveable | dots_with_no_batch_dims_saveable | offload. Sampling never remats.
  remat: str = "none"
  # Layer params stacked along a leading num_layers axis, the uncached pass one lax.scan
  # (layer_stack.py).
  scan_layers: bool = False
  # Layout of the matmuls (same numbers within rounding, different programs; set in code, not
  # in the experiment config). flatten_matmuls: (B, L, D) activations meet the weights as one
  # (B·L, D) GEMM, whose backward XLA:CPU runs much faster than a 3-D dot_general's.
  # fuse_gate_up_decode: a decode step (one position per row) runs the MLP's gate and up
  # projections as one GEMM of twice the width (faster sampling; training keeps two GEMMs).
  flatten_matmuls: bool = True
  fuse_gate_up_decode: bool = True
  # Low-rank adapters (lora.py; set by ``lora.adapted_graphdef``, not by the experiment config):
  # the projections named here (HF module names, "q_proj" ... "down_proj") carry lora_a
  # (in, lora_rank) and lora_b (lora_rank, out) beside their kernel and add
  # lora_scale·(x·A)·B to x·W. () = a plain model.
  lora_targets: tuple = ()
  lora_rank: int = 0
  lora_scale: float = 0.0

  def __post_init__(self):
    for name in (
      "vocab_size",
      "hidden_dim",
      "num_layers",
      "num_heads",
      "num_kv_heads",
      "head_dim",
      "mlp_dim",
    ):
      if int(getattr(self, name)) <= 0:
        raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(
        f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
        f"({self.num_kv_heads}) for grouped-query attention"
      )
    if self.head_dim % 2:
      raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
    for name in ("dtype", "param_dtype"):
      if getattr(self, name) not in DTYPES:
        raise ValueError(f"ModelConfig.{name} must be one of {DTYPES}, got {getattr(self, name)}")
    if self.family not in FAMILIES:
      raise ValueError(f"ModelConfig.family must be one of {sorted(FAMILIES)}, got '{self.family}'")
    if self.layer_types and len(self.layer_types) != self.num_layers:
      n = len(self.layer_types)
      raise ValueError(f"layer_types has {n} entries for {self.num_layers} layers")
    if any(t not in LAYER_TYPES for t in self.layer_types):
      raise ValueError(f"layer_types must be in {LAYER_TYPES}, got {self.layer_types}")
    if "sliding_attention" in self.layer_types and self.sliding_window <= 0:
      raise ValueError("sliding_attention layers need sliding_window > 0")

  def layer_type(self, i: int) -> str:
    return self.layer_types[i] if self.layer_types else "full_attention"

  def layer_rope(self, i: int) -> tuple[float, tuple]:
    """(theta, scaling pairs) of layer i's rotary embedding."""
    if self.layer_type(i) == "sliding_attention":
      return self.sliding_rope_theta or self.rope_theta, self.sliding_rope_scaling
    return self.rope_theta, self.rope_scaling

  def layer_kinds(self) -> tuple[tuple[int, tuple], ...]:
    """The distinct (window, (rope theta, scaling)) of the layers, in order of appearance."""
    kinds = ((self.window(i), self.layer_rope(i)) for i in range(self.num_layers))
    return tuple(dict.fromkeys(kinds))

  def layer_kind(self, i: int) -> int:
    """Index of layer i's (window, rope) in ``layer_kinds``."""
    return self.layer_kinds().index((self.window(i), self.layer_rope(i)))

  def window(self, i: int) -> int:
    """Layer i's sliding window (0 = full causal attention)."""
    return self.sliding_window if self.layer_type(i) == "sliding_attention" else 0

  @property
  def compute_dtype(self) -> jnp.dtype:
    return jnp.dtype(self.dtype)

  @property
  def weight_dtype(self) -> jnp.dtype:
    return jnp.dtype(self.param_dtype)

  @property
  def num_params(self) -> int:
    """Parameter count (the lm_head adds V·D when embeddings are untied)."""
    D, Dh, H, Hk = self.hidden_dim, self.head_dim, self.num_heads, self.num_kv_heads
    attn = D * Dh * (2 * H + 2 * Hk)
    qk_norm = {"head": 2 * Dh, "full": (H + Hk) * Dh, "none": 0}[FAMILIES[self.family].qk_norm]
    attn += qk_norm + (self.attention_bias and (H + 2 * Hk) * Dh + D)
    mlp = 3 * D * self.mlp_dim + (self.mlp_bias and 2 * self.mlp_dim + D)
    layer = attn + mlp + 2 * D
    head = 0 if self.tie_embeddings else self.vocab_size * D
    return self.vocab_size * D + self.num_layers * layer + D + head

  @classmethod
  def from_config(cls, model_cfg, vocab_size: int | None = None) -> ModelConfig:
    """Builds the config from the experiment's ``model`` group.

    ``model_cfg.vocab_size == 0`` means "take it from the tokenizer": the ``vocab_size``
    argument is used then.
    """
    vocab = model_cfg.vocab_size
    if vocab == 0:
      if vocab_size is None:
        raise ValueError("model.vocab_size is 0 (from the tokenizer) but no vocab_size was given")
      vocab = vocab_size
    return cls(
      vocab_size=vocab,
      hidden_dim=model_cfg.hidden_dim,
      num_layers=model_cfg.num_layers,
      num_heads=model_cfg.num_heads,
      num_kv_heads=model_cfg.num_kv_heads,
      head_dim=model_cfg.head_dim,
      mlp_dim=model_cfg.mlp_dim,
      rope_theta=model_cfg.rope_theta,
      norm_eps=model_cfg.norm_eps,
      tie_embeddings=model_cfg.tie_embeddings,
      dtype=model_cfg.dtype,
      param_dtype=model_cfg.param_dtype,
      family=model_cfg.family,
      remat=remat_lib.built(model_cfg.remat),
      scan_layers=model_cfg.scan_layers,
    )
