# judgeflow GPU training image: verl 0.6.1 (FSDP training, vLLM 0.11.0 rollouts), flash-attn,
# LLaMA-Factory 0.9.5 (GRRM SFT, DeepSpeed) and judgeflow itself, on CUDA 12.8 / Python 3.12.
# Build, push and convert for Slurm (Apptainer / enroot): infra/docker/README.md.
#   docker build -t judgeflow-train:0.1.0 .
# Versions: torch 2.8.0 + vLLM 0.11.0 are verl 0.6.1's newest supported pair (its own v0.6 image
# is vllm/vllm-openai:v0.11.0); every Python package is pinned in infra/docker/requirements-gpu.txt.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04
FROM ${CUDA_IMAGE}

# flash-attn 2.8.3 publishes prebuilt wheels for torch 2.8 / CUDA 12 (its setup.py fetches the
# matching one); MAX_JOBS bounds a source build if no wheel matches.
ARG FLASH_ATTN_VERSION=2.8.3
ARG MAX_JOBS=8

LABEL org.opencontainers.image.title="judgeflow-train" \
      org.opencontainers.image.description="verl 0.6.1 + vLLM 0.11.0 + LLaMA-Factory 0.9.5 + judgeflow" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH} \
    RAY_USAGE_STATS_ENABLED=0

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Python 3.12 is Ubuntu 24.04's own; git for hub downloads, numactl/ibverbs for NCCL over IB.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        git \
        libibverbs1 \
        numactl \
        python3.12 \
        python3.12-dev \
        python3.12-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3.12 -m venv "${VIRTUAL_ENV}"

# The locked stack first (a layer that changes only when the lock does), then flash-attn, which
# compiles against the torch just installed and so cannot use build isolation.
COPY infra/docker/requirements-gpu.txt /opt/judgeflow/requirements-gpu.txt
RUN pip install --no-cache-dir -r /opt/judgeflow/requirements-gpu.txt \
    && MAX_JOBS="${MAX_JOBS}" pip install --no-cache-dir --no-build-isolation \
        -c /opt/judgeflow/requirements-gpu.txt "flash-attn==${FLASH_ATTN_VERSION}"

# judgeflow from the build context, without touching the locked dependencies.
WORKDIR /opt/judgeflow
COPY pyproject.toml README.md ./
COPY src ./src
COPY flows ./flows
COPY tasks ./tasks
RUN pip install --no-cache-dir --no-deps --no-build-isolation . \
    && judgeflow dev nltk-punkt \
    && python -c "import judgeflow.engines.verl, judgeflow.rewards" \
    && python -c "from importlib.metadata import version as v; \
pins = {'verl': '0.6.1', 'vllm': '0.11.0', 'torch': '2.8.0', 'llamafactory': '0.9.5', 'transformers': '4.57.6'}; \
found = {name: v(name) for name in pins}; \
assert found == pins, found; \
print('judgeflow GPU image:', found, 'flash-attn', v('flash-attn'))"

WORKDIR /workspace
CMD ["bash"]
