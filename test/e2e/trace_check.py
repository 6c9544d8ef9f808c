#!/usr/bin/env python3
"""Checks on par-run's Chrome trace (--trace) of a pipelined step.

  receives-at-readers TRACE   on pipeline rank 0's track (tid 0), every
                              gradient receive is started where the program
                              lists it (before the next forward) and waited
                              for (a "recv" kernel) right before the BI or
                              B of its micro-batch (par-run's CPU runtime
                              starts each receive in place, MPI_Irecv, and
                              waits at its reader); prints how many of how
                              many, exit 1 unless all
"""

import json
import re
import sys

ACTION = re.compile(r"^(F|B|BI|BW|send-act|send-grad|recv-act|recv-grad)"
                    r"\(mb=(\d+),")


def actions(path, tid):
    """The track's pipeline actions (op, mb) and receive waits ("wait",
    None), in time order."""
    events = [e for e in json.load(open(path))["traceEvents"]
              if e.get("ph") == "X" and e.get("tid") == tid]
    out = []
    for e in sorted(events, key=lambda e: e["ts"]):
        m = ACTION.match(e["name"])
        if m:
            out.append((m.group(1), int(m.group(2))))
        elif e["name"] == "recv" and e.get("cat") == "collective":
            out.append(("wait", None))
    return out


def receives_at_readers(path):
    acts = actions(path, 0)
    starts = [i for i, (op, _) in enumerate(acts) if op == "recv-grad"]
    waits = [i for i, (op, _) in enumerate(acts) if op == "wait"]
    # Each start's micro-batch, in order, is the next wait's: the wait is
    # right before the reader of that micro-batch.
    ok = 0
    for start, wait in zip(starts, waits):
        mb = acts[start][1]
        nxt = acts[wait + 1] if wait + 1 < len(acts) else None
        if wait > start and nxt and nxt[0] in ("BI", "B") and nxt[1] == mb:
            ok += 1
    early = sum(1 for i in starts if i + 1 < len(acts) and
                acts[i + 1][0] == "F")
    print("rank 0: %d of %d gradient receives waited for right before "
          "their reader, %d started before a forward"
          % (ok, len(starts), early))
    return 0 if starts and ok == len(starts) == len(waits) else 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "receives-at-readers":
        sys.exit(__doc__)
    sys.exit(receives_at_readers(sys.argv[2]))
