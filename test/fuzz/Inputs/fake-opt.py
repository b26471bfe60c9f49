#!/usr/bin/env python3
"""A stand-in for fa3-opt that fails on purpose, to test the fuzzer's oracle.

`--help` lists two passes the way fa3-opt does. On an input file it picks,
from a hash of the input text and the arguments, one of: abort (crash),
sleep past any timeout (hang), print "error:" and exit 0 (error-exit-0),
print "error:" and exit 1 (a clean rejection), or exit 0 (fine)."""
import hashlib
import os
import sys
import time

if "--help" in sys.argv:
    print("      --attn-tile                          -   Tile attn.flash_attention\n"
          "        --block-m=<long>                   - Rows of Q per tile\n"
          "        --block-n=<long>                   - Rows of K/V per tile\n"
          "      --attn-hopper-pipeline               -   Compile\n"
          "        --chip=<string>                    - Target GPU\n"
          "        --format=<string>                  - What gpu-module-to-binary embeds\n"
          "        --pingpong                         - Take turns\n"
          "      --canonicalize                       -   Canonicalize operations")
    sys.exit(0)
with open(sys.argv[1], "rb") as f:
    text = f.read()
h = hashlib.sha256(text + " ".join(sys.argv[2:]).encode()).digest()[0] % 5
if h == 0:
    sys.stderr.write("Stack dump:\n #0 0x0000000000401000 fakeCrashSite() (/fake+0x1000)\n")
    sys.stderr.flush()
    os.abort()
elif h == 1:
    time.sleep(60)
elif h == 2:
    print("input.mlir:1:1: error: something went wrong")
    sys.exit(0)
elif h == 3:
    print("input.mlir:1:1: error: a clean rejection")
    sys.exit(1)
sys.exit(0)
