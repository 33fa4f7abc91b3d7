"""Config keys that were replaced, and the mapping that lets recorded runs keep working.

A replaced key fails at load with a message naming its replacement (:func:`replaced`, read by
``grpo_jax.config.base``'s unknown-key errors), whether it comes from a config file, an
override or the launcher's ``--config.<key>``. A run recorded before the change, though, keeps
its old keys in ``config.json`` and ``sweep_run.json``; :func:`upgrade` (a nested config) and
:func:`upgrade_flat` (dotted keys: a sweep's overrides, an aggregated row) rewrite them as the
key that replaced them, so such a run resumes, and is read and labelled, as before:

  advantage.offset_shuffle = True              advantage.offset_control = 'shuffle'
  advantage.offset_noise = True                advantage.offset_control = 'noise'
  advantage.offset_magnitude_scramble = True   advantage.offset_control = 'magnitude_scramble'
  all of them False (or absent)                advantage.offset_control = 'none'

Two of them True was never a valid config (one control replaces the offsets); a recorded
config holding that fails naming both (``grpo_jax.config.fields.fail``).
"""

from __future__ import annotations

from grpo_jax.config.fields import fail

# replaced boolean key -> (the key that replaced it, its value where the old key was True).
RENAMED: dict[str, tuple[str, str]] = {
  "advantage.offset_shuffle": ("advantage.offset_control", "shuffle"),
  "advantage.offset_noise": ("advantage.offset_control", "noise"),
  "advantage.offset_magnitude_scramble": ("advantage.offset_control", "magnitude_scramble"),
}
# The value of the new key where every old key it replaced is False.
UNSET = {"advantage.offset_control": "none"}

_TRUE = ("true", "t", "1", "yes", "on")


def replaced(key: str) -> str | None:
  """The error for a replaced key (None for any other key)."""
  if key not in RENAMED:
    return None
  new, value = RENAMED[key]
  return (
    f"config key {key} was replaced by {new} = {value!r} ({key} = False: {new} = {UNSET[new]!r})"
  )


def _truth(value) -> bool:
  """An old boolean as recorded: a bool, a number, or text (``"True"`` in a CSV)."""
  if isinstance(value, str):
    return value.strip().lower() in _TRUE
  return bool(value)


def upgrade_flat(flat: dict, where: str = "a recorded config") -> dict:
  """``flat`` (dotted keys) with each group of replaced keys turned into the key that replaced
  them, in the place of the first; a dict without replaced keys is returned as a copy.
  ``where`` names the source in the error for two controls True together."""
  values = {}
  for new in {RENAMED[k][0] for k in flat if k in RENAMED}:
    olds = [k for k, (n, _) in RENAMED.items() if n == new and k in flat]
    on = [k for k in olds if _truth(flat[k])]
    if len(on) > 1:
      fail(
        f"{where} sets {' and '.join(on)} to True together; they were replaced by one key, "
        f"{new}, which takes one of {[RENAMED[k][1] for k in on]}"
      )
    values[new] = RENAMED[on[0]][1] if on else UNSET[new]
    if new in flat and flat[new] != values[new]:
      fail(
        f"{where} sets {new} = {flat[new]!r} beside {', '.join(olds)}, which it replaced "
        f"(they say {values[new]!r})"
      )
  out = {}
  for key, value in flat.items():
    new = RENAMED[key][0] if key in RENAMED else key
    if new not in out:
      out[new] = values.get(new, value)
  return out


def upgrade(config: dict, where: str = "a recorded config") -> dict:
  """A nested config (``config.json``'s ``config``) with the replaced keys mapped as
  :func:`upgrade_flat` does (each old key and its replacement share a group)."""
  out = dict(config)
  for group in sorted({k.split(".")[0] for k in RENAMED}):
    values = out.get(group)
    if not isinstance(values, dict):
      continue
    flat = upgrade_flat({f"{group}.{k}": v for k, v in values.items()}, where)
    out[group] = {k.split(".", 1)[1]: v for k, v in flat.items()}
  return out


__all__ = ["RENAMED", "UNSET", "replaced", "upgrade", "upgrade_flat"]
