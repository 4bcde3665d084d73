#!/usr/bin/python3
"""OpenAI CLIP's tokenizer (clip/simple_tokenizer.py, vendored with its MIT licence in
tests/data/tokenizers/reference/clip, with ftfy 6.3.1 beside it) over captions: one JSON string a
line on stdin, one JSON array of ids a line on stdout, as clip.tokenize builds them:
[<|startoftext|>] + encode(caption) + [<|endoftext|>], untruncated.

  clip_reference.py BPE_GZ [--time]   (--time: captions per CPU-second of encode on stderr)
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "..", "data", "tokenizers", "reference")
sys.path.insert(0, REFERENCE)  # ftfy
sys.path.insert(0, os.path.join(REFERENCE, "clip"))

import simple_tokenizer  # noqa: E402


def main():
    tok = simple_tokenizer.SimpleTokenizer(sys.argv[1])
    sot, eot = tok.encoder["<|startoftext|>"], tok.encoder["<|endoftext|>"]
    captions = [json.loads(line) for line in sys.stdin]
    start = time.process_time()  # CPU time: on a shared machine wall time measures the others
    out = [[sot] + tok.encode(c) + [eot] for c in captions]
    seconds = time.process_time() - start
    sys.stdout.write("".join(json.dumps(ids) + "\n" for ids in out))
    if "--time" in sys.argv:
        print(f"clip_reference: {len(captions)} captions in {seconds:.3f} s "
              f"({len(captions) / seconds:.0f} captions/s)", file=sys.stderr)


if __name__ == "__main__":
    main()
