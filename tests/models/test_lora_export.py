"""LoRA export against PEFT (torch CPU): our base written by ``save_hf`` and loaded by
transformers, our PEFT adapter directory loaded onto it by ``peft.PeftModel.from_pretrained``,
give our logits (merged and unmerged) and our greedy tokens; PEFT's own merge equals our merged
checkpoint; the tensor names, shapes and ``adapter_config.json`` are PEFT's."""

import json

import jax
import numpy as np
import pytest
import torch
import transformers
from test_hf_parity import V, make_hf
from test_lora import _random_b

from grpo_jax import models, sampling
from grpo_jax.models import lora, safetensors_io
from grpo_jax.models.hf_io import hf_arrays

peft = pytest.importorskip("peft")

R, ALPHA = 4, 16.0
TARGETS = {"qwen3": ("all_linear",), "llama": ("q", "v", "down")}


@pytest.fixture(scope="module", params=sorted(TARGETS))
def exported(request, tmp_path_factory):
  family = request.param
  src = tmp_path_factory.mktemp(f"{family}_src")
  make_hf(family, seed=3).save_pretrained(src)
  ours = models.load_hf(str(src))
  base_dir = tmp_path_factory.mktemp(f"{family}_base")
  models.save_hf(ours, base_dir)  # the base as we write it: what PEFT's adapter goes onto
  spec = lora.LoraSpec(R, ALPHA, TARGETS[family])
  adapters = _random_b(lora.init_adapters(ours.params, R, spec.targets, jax.random.key(5)), 2, 0.2)
  peft_dir = lora.save_peft(adapters, spec, tmp_path_factory.mktemp("adapter"), str(base_dir))
  base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation="eager")
  peft_model = peft.PeftModel.from_pretrained(base.eval(), peft_dir).eval()
  return family, ours, spec, adapters, peft_dir, peft_model


def _tokens():
  tokens = np.random.RandomState(1).randint(3, V, (2, 11))
  mask = np.ones_like(tokens)
  mask[1, :3] = 0
  tokens[1, :3] = 0
  return tokens, mask


def test_adapter_files_are_pefts(exported):
  family, ours, spec, adapters, peft_dir, _ = exported
  config = json.loads((peft_dir / "adapter_config.json").read_text())
  assert config["peft_type"] == "LORA" and config["r"] == R and config["lora_alpha"] == ALPHA
  assert config["target_modules"] == list(spec.modules)
  assert config["base_model_name_or_path"]
  header, _ = safetensors_io.read_header(peft_dir / "adapter_model.safetensors")
  cfg = ours.config
  widths = {
    "q_proj": (cfg.hidden_dim, cfg.num_heads * cfg.head_dim),
    "k_proj": (cfg.hidden_dim, cfg.num_kv_heads * cfg.head_dim),
    "v_proj": (cfg.hidden_dim, cfg.num_kv_heads * cfg.head_dim),
    "o_proj": (cfg.num_heads * cfg.head_dim, cfg.hidden_dim),
    "gate_proj": (cfg.hidden_dim, cfg.mlp_dim),
    "up_proj": (cfg.hidden_dim, cfg.mlp_dim),
    "down_proj": (cfg.mlp_dim, cfg.hidden_dim),
  }
  want = {}
  for i in range(cfg.num_layers):
    for m in spec.modules:
      sub = "mlp" if m in ("gate_proj", "up_proj", "down_proj") else "self_attn"
      name = f"base_model.model.model.layers.{i}.{sub}.{m}"
      d_in, d_out = widths[m]
      want[f"{name}.lora_A.weight"] = [R, d_in]
      want[f"{name}.lora_B.weight"] = [d_out, R]
  assert {k: v["shape"] for k, v in header.items()} == want
  assert {v["dtype"] for v in header.values()} == {"F32"}
  # Stacked adapters write the same tensors.
  stacked = lora.peft_tensors(models.stack_layers(adapters))
  for name, x in lora.peft_tensors(adapters).items():
    np.testing.assert_array_equal(stacked[name], x)


def test_peft_loads_the_adapter_with_our_logits(exported):
  family, ours, spec, adapters, _, peft_model = exported
  # PEFT's tensors are ours, transposed.
  state = peft_model.state_dict()
  for name, x in lora.peft_tensors(adapters).items():
    key = name.replace(".weight", ".default.weight")
    np.testing.assert_array_equal(state[key].numpy(), x)
  tokens, mask = _tokens()
  with torch.no_grad():
    ref = peft_model(torch.tensor(tokens), attention_mask=torch.tensor(mask)).logits.numpy()
    base_ref = peft_model.get_base_model()
    with peft_model.disable_adapter():
      plain = base_ref(torch.tensor(tokens), attention_mask=torch.tensor(mask)).logits.numpy()
  lm = lora.adapt(ours.graphdef, ours.params, spec)
  keep = mask.astype(bool)
  for mode in ("merged", "unmerged"):
    got = np.asarray(models.forward(*lm.view(ours.params, adapters, mode), tokens, mask))
    np.testing.assert_allclose(got[keep], ref[keep], atol=1e-4, rtol=0, err_msg=mode)
  base = np.asarray(models.forward(*lm.view(ours.params, adapters, "base"), tokens, mask))
  np.testing.assert_allclose(base[keep], plain[keep], atol=1e-4, rtol=0)
  assert np.abs(ref - plain)[keep].max() > 0.05  # the adapter changes the logits


def test_greedy_tokens_equal_pefts(exported):
  family, ours, spec, adapters, _, peft_model = exported
  prompt = np.random.RandomState(2).randint(3, V, (1, 6))
  T = 10
  with torch.no_grad():
    ref = peft_model.generate(
      input_ids=torch.tensor(prompt),
      max_new_tokens=T,
      min_new_tokens=T,
      do_sample=False,
      eos_token_id=None,
      pad_token_id=0,
    ).numpy()[0, 6:]
  lm = lora.adapt(ours.graphdef, ours.params, spec)
  decode = sampling.Decode(max_new_tokens=T, eos_id=-1, pad_id=0, temperature=0.0)
  for mode in ("unmerged", "merged"):
    g, p = lm.view(ours.params, adapters, mode)
    out = sampling.sample(g, p, prompt, np.ones_like(prompt), np.asarray([0, 0], np.uint32), decode)
    np.testing.assert_array_equal(np.asarray(out.tokens_NxT)[0], ref, err_msg=mode)


def test_merged_checkpoint_is_pefts_merge(exported, tmp_path):
  family, ours, spec, adapters, peft_dir, _ = exported
  lora.save_merged(ours, adapters, spec, tmp_path)
  merged = models.load_hf(str(tmp_path))
  # PEFT's merge_and_unload of a fresh copy: W + (α/r)·B_t·A_t per target.
  fresh = transformers.AutoModelForCausalLM.from_pretrained(
    json.loads((peft_dir / "adapter_config.json").read_text())["base_model_name_or_path"],
    attn_implementation="eager",
  )
  peft_merged = peft.PeftModel.from_pretrained(fresh, peft_dir).merge_and_unload().state_dict()
  for name, x in hf_arrays(merged.params):
    np.testing.assert_allclose(x, peft_merged[name].numpy(), atol=1e-6, rtol=0, err_msg=name)
  hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager")
  tokens, mask = _tokens()
  with torch.no_grad():
    ref = hf(torch.tensor(tokens), attention_mask=torch.tensor(mask)).logits.numpy()
  keep = mask.astype(bool)
  np.testing.assert_allclose(np.asarray(merged(tokens, mask))[keep], ref[keep], atol=1e-4, rtol=0)


def test_load_peft_reads_back_what_we_wrote(exported):
  family, ours, spec, adapters, peft_dir, _ = exported
  got_spec, got = lora.load_peft(peft_dir, ours.params)
  assert (got_spec.rank, got_spec.alpha, got_spec.modules) == (spec.rank, spec.alpha, spec.modules)
  jax.tree.map(np.testing.assert_array_equal, got, adapters)
  _, got_s = lora.load_peft(peft_dir, models.stack_layers(ours.params))
  jax.tree.map(np.testing.assert_array_equal, got_s, models.stack_layers(adapters))


def test_an_adapter_peft_trained_loads_with_pefts_logits(exported, tmp_path):
  """PEFT's own adapter (``get_peft_model``, B set random, ``save_pretrained``) applied by us,
  unmerged, gives PEFT's logits."""
  family, ours, _, _, peft_dir, _ = exported
  base_dir = json.loads((peft_dir / "adapter_config.json").read_text())["base_model_name_or_path"]
  base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation="eager")
  config = peft.LoraConfig(r=2, lora_alpha=5, target_modules=["o_proj", "up_proj", "k_proj"])
  model = peft.get_peft_model(base, config).eval()
  torch.manual_seed(0)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if "lora_B" in name:
        p.copy_(0.3 * torch.randn_like(p))
  model.save_pretrained(tmp_path)
  spec, adapters = lora.load_peft(tmp_path, ours.params)
  assert spec == lora.LoraSpec(2, 5.0, ("k", "o", "up"))
  tokens, mask = _tokens()
  with torch.no_grad():
    ref = model(torch.tensor(tokens), attention_mask=torch.tensor(mask)).logits.numpy()
  lm = lora.adapt(ours.graphdef, ours.params, spec)
  got = np.asarray(models.forward(*lm.view(ours.params, adapters), tokens, mask))
  keep = mask.astype(bool)
  np.testing.assert_allclose(got[keep], ref[keep], atol=1e-4, rtol=0)


def test_adapters_we_cannot_apply_are_refused(exported, tmp_path):
  family, ours, _, _, peft_dir, _ = exported
  config = json.loads((peft_dir / "adapter_config.json").read_text())
  (tmp_path / "adapter_model.safetensors").write_bytes(
    (peft_dir / "adapter_model.safetensors").read_bytes()
  )
  for edit, needle in (
    ({"use_rslora": True}, "use_rslora"),
    ({"target_modules": ["q_proj", "lm_head"]}, "lm_head"),
    ({"r": 2 * R}, "has shape"),
  ):
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(ValueError, match=needle):
      lora.load_peft(tmp_path, ours.params)
