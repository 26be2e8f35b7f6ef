"""Text generation with a GPT-2 in one Session.run: a small GPT-2 from Hugging Face's
transformers (random weights, no download), its weights copied into fragflow's GPT-2
(ff.gpt2_decoder), and the tokens generated greedily after a prompt checked token for
token against transformers' own generate(do_sample=False); then top-k sampling with a
seed.

    python examples/generate.py [--new-tokens 24] [--prompt-length 8] [--batch 1]
                                [--backend gl|numpy] [--top-k 20] [--temperature 0.8]

The prompt goes through the model once (the prefill) and each further token is one
iteration of a loop whose loop variables are the key/value cache (docs/TRANSFORMERS.md,
"Generation"). Needs torch and transformers (pip install 'fragflow[test]').
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optional import require  # noqa: E402  (what to install; before torch below)

if __name__ == "__main__":
    require("examples/generate.py", {"torch": "torch", "transformers": "transformers"},
            "test")

import torch  # noqa: E402  (before fragflow's first GL context: see docs/ONNX.md)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

import fragflow as ff  # noqa: E402

# initializer_range 0.4 rather than GPT-2's 0.02: with 0.02 random weights greedy
# decoding repeats one token; with 0.4 the tokens vary and the top two logits of every
# step stay far apart (a gap of 0.06 for the default prompt, float32 rounding ~1e-6)
CONFIG = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=500, n_positions=128,
              initializer_range=0.4, bos_token_id=0, eos_token_id=None, pad_token_id=0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--prompt-length", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--backend", default="gl", choices=["gl", "numpy"])
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    config = GPT2Config(**CONFIG)
    model = GPT2LMHeadModel(config).eval()
    prompt = torch.randint(0, config.vocab_size, (args.batch, args.prompt_length))
    start = time.perf_counter()
    with torch.no_grad():
        expected = model.generate(prompt, max_new_tokens=args.new_tokens,
                                  do_sample=False)[:, args.prompt_length:].numpy()
    torch_s = time.perf_counter() - start

    decoder = ff.gpt2_decoder(model.state_dict(), config)
    g = ff.Graph()
    with g.as_default():
        ids = ff.placeholder(tuple(prompt.shape), "int32", name="input_ids")
        greedy = decoder.generate(ids, args.new_tokens)
        sampled = decoder.generate(ids, args.new_tokens, do_sample=True, top_k=args.top_k,
                                   temperature=args.temperature, seed=args.seed)
    feeds = {ids: prompt.numpy().astype(np.int32)}
    with ff.Session(g, backend=args.backend) as sess:
        start = time.perf_counter()
        tokens, samples = sess.run([greedy, sampled], feeds)        # compiles, then runs
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        sess.run(greedy, feeds)
        run_s = time.perf_counter() - start

    print(f"GPT-2: {config.n_layer} layers, {config.n_embd} wide, {config.n_head} heads, "
          f"vocabulary {config.vocab_size}; prompt {list(prompt.shape)}, "
          f"{args.new_tokens} new tokens")
    for row in range(args.batch):
        print(f"prompt         {prompt[row].tolist()}")
        print(f"transformers   {expected[row].tolist()}")
        print(f"fragflow       {tokens[row].tolist()}")
        print(f"sampled (top-k {args.top_k}, temperature {args.temperature}, seed "
              f"{args.seed}) {samples[row].tolist()}")
    print(f"transformers generate {torch_s:.3f} s; fragflow ({args.backend}) first run "
          f"{first_s:.2f} s (with its compile), a greedy run {run_s:.3f} s")
    mismatches = int((tokens != expected).sum())
    if mismatches:
        sys.exit(f"{mismatches} tokens differ from transformers' generate")
    print(f"all {tokens.size} tokens equal transformers' generate")


if __name__ == "__main__":
    main()
