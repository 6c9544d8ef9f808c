"""Checks for memory-pipeline.test: par-run --pipeline's memory plans."""
import re
import sys

PLAN = re.compile(r'memory plan of pipeline rank (\d+) \((\w+)\): peak '
                  r'([0-9.]+) MiB \((\d+) bytes\) in (\S+) = .*most in '
                  r'flight [0-9.]+ MiB \((\d+) stage inputs\)')
LINE = re.compile(r'memory \(rank (\d+)\): predicted ([0-9.]+) MiB, '
                  r'measured peak ([0-9.]+) MiB')
STASH = re.compile(r'peak in-flight activations \(stage inputs(?: and forward '
                   r'residuals)? held\), per '
                   r'pipeline rank:(.*)')


def parse(path):
    """The plans (predicted, per pipeline rank), the memory line's predicted
    and measured MiB, and what each pipeline rank's executor held (the most
    stage inputs at once, their bytes) and the allocator's peak there."""
    text = open(path).read()
    plans = {}
    for m in PLAN.finditer(text):
        plans[int(m.group(1))] = {
            'schedule': m.group(2), 'mib': float(m.group(3)),
            'bytes': int(m.group(4)), 'at': m.group(5),
            'stashed': int(m.group(6))}
    line = LINE.search(text)
    stash = STASH.search(text)
    assert plans, 'no memory plan lines in ' + path
    assert line, 'no memory line in ' + path
    assert stash, 'no in-flight line in ' + path
    held = {}
    for r, count, total, peak in re.findall(
            r'(\d+): (\d+) \((\d+) bytes; measured peak (\d+) bytes\)',
            stash.group(1)):
        held[int(r)] = {'stashed': int(count), 'bytes': int(total),
                        'peak': int(peak)}
    assert sorted(held) == sorted(plans), (held, plans)
    return plans, float(line.group(2)), float(line.group(3)), held


def in_flight(schedule, p, m, v, r):
    """The most stage inputs rank r holds at once (RationalePipeline.md)."""
    if schedule == 'gpipe':
        return m
    if schedule == '1f1b':
        return min(p - r, m)
    if schedule == 'zbh1':
        return min(p, m)
    if schedule == 'interleaved':
        return min(2 * (p - 1 - r) + (v - 1) * p + 1, v * m)
    raise SystemExit('unknown schedule ' + schedule)


def check_run(path, schedule, p, m, v, tol):
    plans, predicted, measured, held = parse(path)
    err = abs(predicted - measured) / measured
    print('%s: predicted %.2f MiB, measured %.2f MiB, error %.4f' %
          (schedule, predicted, measured, err))
    assert err <= tol, (path, predicted, measured)
    # The line's prediction is one pipeline rank's plan.
    assert any(abs(pl['mib'] - predicted) < 0.006 for pl in plans.values()), \
        (predicted, plans)
    for r in range(p):
        want = in_flight(schedule, p, m, v, r)
        got = held[r]['stashed']
        pred, meas = plans[r]['bytes'], held[r]['peak']
        print('  rank %d: %d stage inputs held at once (formula %d), peak '
              'predicted %d bytes in %s, measured %d' % (
                  r, got, want, pred, plans[r]['at'], meas))
        assert plans[r]['schedule'] == schedule, plans[r]
        assert got == want, (r, got, want)
        assert plans[r]['stashed'] == got, (r, plans[r], got)
        assert abs(pred - meas) <= tol * meas, (r, pred, meas)


def check_schedules(g4, g8, o8):
    last = 1
    a, b, c = (parse(x)[3][last]['peak'] for x in (g4, g8, o8))
    h = parse(g8)[3][last]
    x = h['bytes'] // h['stashed']
    print('last stage measured peaks: gpipe m=4 %d, gpipe m=8 %d, 1f1b m=8 '
          '%d bytes; stage input %d bytes' % (a, b, c, x))
    assert b - a == 4 * x, (b - a, x)
    assert c < a, (c, a)
    print('last stage: gpipe m=8 - gpipe m=4 = 4 stage inputs; '
          '1f1b m=8 < gpipe m=4')


def check_residuals(stash, full, recompute):
    a, b, c = (parse(x)[3] for x in (stash, full, recompute))
    for r in sorted(a):
        per = [h[r]['bytes'] // max(h[r]['stashed'], 1) for h in (a, b, c)]
        ok = per[0] > per[1] > per[2]
        print('rank %d: stash %d > recompute=full %d > stash=false %d bytes '
              'a micro-batch: %s' % (r, per[0], per[1], per[2], ok))
        assert ok, per


if __name__ == '__main__':
    if sys.argv[1] == 'run':
        check_run(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                  int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
    elif sys.argv[1] == 'schedules':
        check_schedules(*sys.argv[2:5])
    elif sys.argv[1] == 'residuals':
        check_residuals(*sys.argv[2:5])
    else:
        raise SystemExit('unknown check ' + sys.argv[1])
