#!/usr/bin/env python3
"""Prints chunk INDEX (0-based) of a -split-input-file test file."""
import sys

path, index = sys.argv[1], int(sys.argv[2])
with open(path, encoding="utf-8") as f:
    chunks = f.read().split("// -----")
sys.stdout.write(chunks[index])
