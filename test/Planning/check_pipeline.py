"""Checks how par-plan prices par's pipeline (docs/Planning.md, "Pipeline")
from --explain outputs, each against a quantity found without the
planner's pricing: another par-plan run with one feature changed, or the
action counts of the schedule core's timetable (par-pipeline-sim --json,
lib/Pipelining/Schedule, the same builder the planner calls):

  recompute A G SIM   A: pp > 1, 1F1B, recompute=none; G: the same with
                      GPipe; SIM: the timetable of A's schedule. Each
                      backward action (B) of the timetable redoes its
                      stage's forward, so A's recompute is #B stage
                      forwards (the forward phase over #F); G runs the same
                      actions in another order: its forward, backward and
                      recompute are A's, only its bubble differs;
  zbh1 Z A ZS AS      Z: ZB-H1; A: the same with 1F1B; ZS, AS: their
                      timetables.
                      Splitting the backward moves no work out of the
                      forward and backward phases (Z's equal A's); each BI
                      and BW action redoes A's per-backward recompute and
                      each BW also BI's half of A's per-action backward;
                      Z's bubble is below A's;
  stash S R           S: 1F1B, the forwards keeping their residuals (the
                      default); R: the same with stash=false. S redoes no
                      stage forward (recompute 0, R's the forward), its
                      forward and backward phases are R's, its step is
                      shorter and its activations larger (each micro-batch
                      in flight holds its residuals, not its stage input);
  zbstash Z S         Z: ZB-H1 with the forwards keeping their residuals
                      (BI and BW split one backward), S: 1F1B the same:
                      no recomputation, the same forward and backward
                      phases, a smaller bubble and step;
  shared A B          A with node.processors, B the same machine without:
                      the pipelined step of A is shorter (a rank runs faster
                      while the others wait), the phases other than the
                      bubble equal;
  stretch A B S       A on a machine with node.sync_stretch S, B the same
                      without: computation (forward, backward, optimizer) is
                      1 + S times B's, the communication phases B's;
  zero Z1 Z0          Z1: zero=1, Z0: zero=0, on a machine without
                      latencies (times are bytes over bandwidth): zero=1's
                      reduce-scatters and all-gathers move what zero=0's
                      ring all-reduce moves (2(n-1)/n S: the reduction in
                      all is the same), and none of it is hidden
                      (data-parallel comm = the reduction in all), while
                      the computation phases are zero=0's;
and that the phases add up to the step in each file.
"""
import json
import re
import sys

PHASES = ["forward", "backward", "recompute", "tensor-parallel comm",
          "pipeline bubble", "data-parallel comm", "zero-3 gathers",
          "optimizer"]


def phases(path):
    out = open(path).read()
    got = {}
    for name in PHASES + ["step"]:
        m = re.search(r"^  %s +(-?[0-9.e+-]+) s" % re.escape(name), out, re.M)
        got[name] = float(m.group(1))
    total = sum(got[p] for p in PHASES)
    if abs(total - got["step"]) > 1e-4 * got["step"]:  # 6 digits each
        sys.exit("%s: phases add up to %g, step %g" % (path, total,
                                                       got["step"]))
    return got


def reduction(path):
    """The data-parallel reduction in all (hidden or not), seconds."""
    return float(re.search(r"data-parallel reduction in all ([0-9.e+-]+) s",
                           open(path).read()).group(1))


def close(a, b):
    return abs(a - b) <= 1e-4 * max(abs(a), abs(b))


def timetable(path, run):
    """Per rank of the schedule core's timetable: {op: count}; the
    timetable must be that of `run`'s schedule, pp and m."""
    sim = json.load(open(path))
    conf = re.search(r"^configuration: .*\bpp=(\d+) v=\d+ m=(\d+) .*"
                     r"schedule=(\w+)", open(run).read(), re.M)
    want = (int(conf.group(1)), int(conf.group(2)), conf.group(3))
    got = (sim["p"], sim["m"], sim["schedule"])
    if got != want:
        sys.exit("%s is the timetable of pp, m, schedule %s, %s runs %s" %
                 (path, got, run, want))
    counts = []
    for actions in sim["timetable"]:
        c = {}
        for a in actions:
            c[a["op"]] = c.get(a["op"], 0) + 1
        counts.append(c)
    return counts


def same_counts(counts):
    """The busiest rank's counts; every rank runs the same actions here
    (one stage per rank)."""
    assert all(c == counts[0] for c in counts), counts
    return counts[0]


def verdict(ok):
    return "OK" if ok else "FAIL"


mode = sys.argv[1]
if mode == "recompute":
    a, g = phases(sys.argv[2]), phases(sys.argv[3])
    c = same_counts(timetable(sys.argv[4], sys.argv[2]))
    want = c["B"] * a["forward"] / c["F"]
    ok = a["forward"] > 0 and close(a["recompute"], want)
    print("timetable: %d F, %d B per rank; recompute / (#B stage forwards) "
          "= %.4f: %s" % (c["F"], c["B"], a["recompute"] / want, verdict(ok)))
    same = all(close(a[k], g[k]) for k in ("forward", "backward", "recompute"))
    ok = same and not close(a["pipeline bubble"], g["pipeline bubble"])
    print("gpipe: forward, backward, recompute equal 1f1b's: %s, bubble "
          "differs: %s" % (same, verdict(ok)))
elif mode == "zbh1":
    z, a = phases(sys.argv[2]), phases(sys.argv[3])
    c = same_counts(timetable(sys.argv[4], sys.argv[2]))
    ca = same_counts(timetable(sys.argv[5], sys.argv[3]))
    # Per backward action of the 1F1B run: its recompute (a stage forward)
    # and its backward.
    per_r, per_b = a["recompute"] / ca["B"], a["backward"] / ca["B"]
    want = (c["BI"] + c["BW"]) * per_r + c["BW"] * per_b / 2
    same = close(z["forward"], a["forward"]) and close(z["backward"],
                                                       a["backward"])
    ok = per_r > 0 and per_b > 0 and same and close(z["recompute"], want) \
        and z["pipeline bubble"] < a["pipeline bubble"]
    print("timetable: %d F, %d BI, %d BW per rank; forward, backward equal "
          "1f1b's: %s; recompute / ((#BI + #BW) 1f1b recomputes + #BW half "
          "backwards) = %.4f; bubble %.2fx 1f1b's: %s" % (
              c["F"], c["BI"], c["BW"], same, z["recompute"] / want,
              z["pipeline bubble"] / a["pipeline bubble"], verdict(ok)))
elif mode == "stash":
    st, re_ = phases(sys.argv[2]), phases(sys.argv[3])
    act = [float(re.search(r"activations\s+([0-9.e+-]+) GiB", open(p).read())
                 .group(1)) for p in sys.argv[2:4]]
    same = close(st["forward"], re_["forward"]) and \
        close(st["backward"], re_["backward"])
    ok = st["recompute"] == 0 and re_["recompute"] > 0 and same and \
        st["step"] < re_["step"] and act[0] > act[1]
    print("stash: recompute %g, forward and backward equal stash=false's: "
          "%s, step %.2fx stash=false's, activations %.2fx: %s" % (
              st["recompute"], same, st["step"] / re_["step"],
              act[0] / act[1], verdict(ok)))
elif mode in ("zbstash", "zbv"):
    # zbstash: ZB-H1 on the residuals against 1F1B; zbv: ZB-V against
    # ZB-H1 on the same model (each chunk is half a stage). The same work,
    # no stage forward redone, a smaller bubble and step.
    z, a = phases(sys.argv[2]), phases(sys.argv[3])
    same = close(z["forward"], a["forward"]) and \
        close(z["backward"], a["backward"])
    ok = z["recompute"] == 0 and same and \
        z["pipeline bubble"] < a["pipeline bubble"] and z["step"] < a["step"]
    what, peer = (("zbh1 on the residuals", "1f1b") if mode == "zbstash"
                  else ("zbv", "zbh1"))
    print("%s: recompute %g, forward and backward equal %s's: %s, bubble "
          "%.2fx, step %.2fx %s's: %s" % (
              what, z["recompute"], peer, same,
              z["pipeline bubble"] / a["pipeline bubble"],
              z["step"] / a["step"], peer, verdict(ok)))
elif mode == "shared":
    a, b = phases(sys.argv[2]), phases(sys.argv[3])
    same = all(close(a[k], b[k]) for k in PHASES if k != "pipeline bubble")
    ok = same and a["step"] < b["step"]
    print("shared / dedicated step = %.3f, other phases equal: %s: %s" % (
        a["step"] / b["step"], same, verdict(ok)))
elif mode == "stretch":
    a, b = phases(sys.argv[2]), phases(sys.argv[3])
    s = float(sys.argv[4])
    ratios = [a[k] / b[k] for k in ("forward", "backward", "optimizer")]
    comm = all(close(a[k], b[k]) for k in ("tensor-parallel comm",
                                            "data-parallel comm"))
    ok = comm and all(abs(r - (1 + s)) < 1e-4 for r in ratios)
    print("computation ratios %s, communication equal: %s: %s" % (
        " ".join("%.4f" % r for r in ratios), comm, verdict(ok)))
elif mode == "zero":
    z1, z0 = phases(sys.argv[2]), phases(sys.argv[3])
    t1, t0 = reduction(sys.argv[2]), reduction(sys.argv[3])
    same = all(close(z1[k], z0[k]) for k in
               ("forward", "backward", "recompute", "tensor-parallel comm"))
    ok = same and t0 > 0 and close(t1, t0) and \
        close(z1["data-parallel comm"], t1)
    print("zero=1 / zero=0 reduction in all = %.4f, exposed / total = "
          "%.4f, computation equal: %s: %s" % (
              t1 / t0, z1["data-parallel comm"] / t1, same, verdict(ok)))
else:
    sys.exit("unknown mode " + mode)
