#!/usr/bin/env python3
"""Checks on par-run's Chrome trace (--trace) of a pipelined step.

  receives-at-readers TRACE   on pipeline rank 0's track (tid 0), every
                              gradient receive is followed directly by the
                              BI or B of its micro-batch (par-run's CPU
                              runtime moves each receive to its reader);
                              prints how many of how many, exit 1 unless all
"""

import json
import re
import sys

ACTION = re.compile(r"^(F|B|BI|BW|send-act|send-grad|recv-act|recv-grad)"
                    r"\(mb=(\d+),")


def actions(path, tid):
    """The track's pipeline actions (op, mb), in time order."""
    events = [e for e in json.load(open(path))["traceEvents"]
              if e.get("ph") == "X" and e.get("tid") == tid]
    out = []
    for e in sorted(events, key=lambda e: e["ts"]):
        m = ACTION.match(e["name"])
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def receives_at_readers(path):
    acts = actions(path, 0)
    recvs = [i for i, (op, _) in enumerate(acts) if op == "recv-grad"]
    ok = [i for i in recvs if i + 1 < len(acts) and
          acts[i + 1][0] in ("BI", "B") and acts[i + 1][1] == acts[i][1]]
    print("rank 0: %d of %d gradient receives right before their reader"
          % (len(ok), len(recvs)))
    return 0 if recvs and len(ok) == len(recvs) else 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "receives-at-readers":
        sys.exit(__doc__)
    sys.exit(receives_at_readers(sys.argv[2]))
