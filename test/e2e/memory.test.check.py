"""Checks for memory.test: the manifest's memory plans and par-run's line."""
import json
import re
import sys

MIB = 1024.0 * 1024.0


def plans(path):
    m = json.load(open(path))
    return {f['name']: f['memory'] for f in m['functions']}


def check_plan(path):
    p = plans(path)
    for name, plan in p.items():
        parts = sum(plan['at_peak'].values())
        assert parts == plan['peak'], (name, parts, plan['peak'])
        assert plan['peak'] == plan['arguments'] + plan['results'] + plan['program_peak'], name
    # Donated buffers: the step writes the parameters and the optimizer
    # state into its arguments, so the runner holds no result buffers for
    # them (4 bytes: the loss).
    assert p['gpt_step']['results'] == 4, p['gpt_step']
    step = p['gpt_step']['at_peak']
    # Adam: m and v per parameter (and a step count), held as arguments
    # like the parameters.
    assert abs(step['optimizer_state'] - 2 * step['parameters']) <= 64, step
    assert step['activations'] > 0, step
    assert p['gpt_step']['saved_activations'] == \
        p['gpt_grad']['saved_activations'] > 0, p['gpt_step']
    # The grad function returns the loss and a gradient per parameter.
    grad = p['gpt_grad']
    assert grad['results'] == grad['at_peak']['parameters'] + 4, grad
    print('plan ok:', {k: v for k, v in step.items() if v})


def check_measured(path, tol):
    text = open(path).read()
    m = re.search(r'memory \(rank (\d+)\): predicted ([0-9.]+) MiB, '
                  r'measured peak ([0-9.]+) MiB', text)
    assert m, 'no memory line'
    predicted, measured = float(m.group(2)), float(m.group(3))
    err = abs(predicted - measured) / measured
    print('predicted %.2f MiB, measured %.2f MiB, error %.4f' %
          (predicted, measured, err))
    assert err <= tol, err
    # The allocator's count against the kernel's: the process's resident
    # set grew by at least what was counted live at the peak and what the
    # buffer pool holds (both are written memory: session buffers and pool
    # blocks; the growth also has OpenBLAS's work buffers, MPI's and the
    # threads' stacks). 0.01 MiB: the line's rounding.
    r = re.search(r'resident peak ([0-9.]+) MiB over ([0-9.]+) MiB before '
                  r'the first buffer \(\+([0-9.]+) MiB\); the buffer pool '
                  r'holds ([0-9.]+) MiB', text)
    assert r, 'no resident figures'
    growth, pool = float(r.group(3)), float(r.group(4))
    ok = measured <= growth + 0.01 and pool <= growth + 0.01
    print('measured %.2f MiB and pool %.2f MiB <= resident growth %.2f MiB: '
          '%s' % (measured, pool, growth, ok))
    assert ok


def check_limit_in_range(path, limit_mib):
    plan = plans(path)['gpt_step']
    held = (plan['arguments'] + plan['results']) / MIB
    peak = plan['peak'] / MIB
    print('held %.2f MiB < limit %.2f MiB < peak %.2f MiB' %
          (held, limit_mib, peak))
    assert held < limit_mib < peak


if __name__ == '__main__':
    what = sys.argv[1]
    if what == 'plan':
        check_plan(sys.argv[2])
    elif what == 'measured':
        check_measured(sys.argv[2], float(sys.argv[3]))
    elif what == 'limit-in-range':
        check_limit_in_range(sys.argv[2], float(sys.argv[3]))
