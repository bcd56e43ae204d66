#!/usr/bin/env python3
"""Integration tests of libgpumem-preload.so over the fake driver.

Usage: test_preload.py CASE BUILD_DIR
Each case runs a probe (pl_probe.c, pl_linked.c, pl_plug.c) under
LD_PRELOAD of the real library with the fake libcuda.so.1 first on
LD_LIBRARY_PATH, and checks exit codes, stderr and the report files.
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile

MiB = 1 << 20
GiB = 1 << 30


class Ctx:
    def __init__(self, build):
        self.build = build
        self.lib = os.path.join(build, 'allocator/preload/libgpumem-preload.so')
        self.fake = os.path.join(build, 'tests/fake')
        self.bin = os.path.join(build, 'tests/integration')
        self.gpumem = os.path.join(build, 'tools/gpumem/gpumem')
        self.tmp = tempfile.mkdtemp(prefix='gpumem-preload-')

    def env(self, preload=True, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('GPUMEM_', 'FAKECUDA', 'RANK'))}
        env['LD_LIBRARY_PATH'] = self.fake
        # A sanitizer build: the preload library comes before the
        # runtime in the initial library list; ASan accepts that once
        # told (the library never replaces malloc).
        env['ASAN_OPTIONS'] = ':'.join(
            x for x in (os.environ.get('ASAN_OPTIONS'),
                        'verify_asan_link_order=0') if x)
        if preload:
            env['LD_PRELOAD'] = self.lib
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def run(self, argv, env, expect=0):
        p = subprocess.run(argv, env=env, capture_output=True, text=True,
                           timeout=60)
        if p.returncode != expect:
            fail(f'{argv} exited {p.returncode}, expected {expect}\n'
                 f'stdout: {p.stdout}\nstderr: {p.stderr}')
        return p

    def probe(self, scenario, expect=0, **extra):
        return self.run([os.path.join(self.bin, 'pl_probe'), scenario],
                        self.env(**extra), expect)

    def path(self, name):
        return os.path.join(self.tmp, name)


def fail(msg):
    print('FAIL:', msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def load(path):
    check(os.path.exists(path), f'no report at {path}')
    with open(path) as f:
        return json.load(f)


def case_cap(c):
    c.probe('cap', GPUMEM_LIMIT='1GiB')


def case_info(c):
    c.probe('info', GPUMEM_FRACTION='0.25', FAKECUDA_TOTAL='76G',
            FAKECUDA_OTHERS='75G')


def case_clamp(c):
    c.probe('clamp', GPUMEM_LIMIT='64MiB')
    # a limit above the card (16 GiB fake) never binds: said once
    p = c.probe('alloc', PROBE_BYTES=MiB, PROBE_EXPECT=0,
                GPUMEM_LIMIT='200GiB')
    check(p.stderr.count('GPUMEM_LIMIT 200.00 GiB is above it and never '
                         'binds') == 1, p.stderr)
    p = c.probe('alloc', PROBE_BYTES=MiB, PROBE_EXPECT=0,
                GPUMEM_LIMIT='8GiB')
    check('never binds' not in p.stderr, p.stderr)


def case_vmm(c):
    c.probe('vmm', GPUMEM_LIMIT='64MiB')


def case_async(c):
    c.probe('async', GPUMEM_LIMIT='64MiB')


def case_variants(c):
    c.probe('variants')


def case_errors(c):
    rep = c.path('errors.json')
    c.probe('errors', GPUMEM_LIMIT='64MiB', FAKECUDA_FAIL_ALLOC='2',
            GPUMEM_REPORT=rep)
    d = load(rep)['devices'][0]
    check(d['oom_device_count'] == 1 and d['oom_cap_count'] == 0,
          f'driver OOM not counted as such: {d}')
    check(d['oom_verdict'] == 'device', d['oom_verdict'])
    check(d['allocated_bytes'] == 0, d)


def case_threads(c):
    rep = c.path('threads.json')
    c.probe('threads', GPUMEM_LIMIT='64MiB', GPUMEM_REPORT=rep)
    d = load(rep)['devices'][0]
    check(d['peak_reserved_bytes'] <= 64 * MiB, d)
    check(d['reserved_bytes'] == 0 and d['allocated_bytes'] == 0, d)
    check(d['alloc_count'] == d['free_count'] and d['alloc_count'] > 1000,
          d)


def case_cap_exact(c):
    # Slow frees (2 ms): the charge of a free is given back only once the
    # driver's free returned, so the driver never holds more than the cap;
    # the report's peak is the high-water mark of the charge.
    rep = c.path('exact.json')
    c.probe('cap_exact', GPUMEM_LIMIT='64MiB', FAKECUDA_FREE_DELAY_US=2000,
            GPUMEM_REPORT=rep)
    d = load(rep)['devices'][0]
    check(d['peak_reserved_bytes'] <= 64 * MiB and d['reserved_bytes'] == 0
          and d['oom_cap_count'] > 0, d)


def case_pitch_cap(c):
    c.probe('pitch_cap', GPUMEM_LIMIT='64MiB')


def case_cap_wrap(c):
    c.probe('cap_wrap', GPUMEM_LIMIT='64MiB')


def case_fraction_edge(c):
    # 0.29 of 100 MiB is exactly 30408704 bytes: that request fits, one
    # byte more does not (binary 0.29 x total truncated was a byte short).
    for n, rc in ((30408704, 0), (30408705, 2)):
        c.probe('alloc', FAKECUDA_TOTAL='100M', GPUMEM_FRACTION='0.29',
                PROBE_BYTES=n, PROBE_EXPECT=rc)


def case_bad_env(c):
    # A cap setting that cannot be read fails closed: the library refuses
    # every allocation and says why; gpumem run does not start the
    # program (exit 2, naming the variable or option).
    for var, val in (('GPUMEM_FRACTION', '0.5 '), ('GPUMEM_FRACTION', '50%'),
                     ('GPUMEM_FRACTION', '0,5'), ('GPUMEM_LIMIT', '50%'),
                     ('GPUMEM_LIMIT', '1,5GiB')):
        p = c.probe('alloc', PROBE_BYTES=MiB, PROBE_EXPECT=2, **{var: val})
        # the reason once (at start-up); the refusal names the setting
        # and tells no cap it does not have
        check(p.stderr.count(f'{var}={val} is not') == 1 and
              f'refused because {var}={val} cannot be read' in p.stderr and
              'cap none' not in p.stderr and 'under the cap' not in
              p.stderr, p.stderr)
        mark = c.path('ran')
        p = c.run([c.gpumem, 'run', '--', 'touch', mark],
                  c.env(preload=False, **{var: val}), 2)
        check(var in p.stderr and not os.path.exists(mark), p.stderr)
    p = c.run([c.gpumem, 'run', '--fraction', '0.5 ', '--', 'true'],
              c.env(preload=False), 2)
    check('--fraction' in p.stderr, p.stderr)
    c.run([c.gpumem, 'run', '--fraction', '0.29', '--', 'true'],
          c.env(preload=False))


def case_early(c):
    # The program's own library calls the driver in its constructor,
    # before the preload library's: the cap is read on that first call.
    env = c.env(GPUMEM_LIMIT='64MiB')
    env['LD_LIBRARY_PATH'] = c.fake + ':' + c.bin
    p = c.run([os.path.join(c.bin, 'pl_early')], env)
    check('total 67108864' in p.stderr, p.stderr)


def case_fork_setup(c):
    # fork() while another thread sets the device up (a 300 ms set-up):
    # the child does not inherit the set-up lock held by a thread it
    # does not have.
    c.probe('fork_setup', GPUMEM_LIMIT='64MiB',
            FAKECUDA_SETUP_DELAY_US=300000)


def case_fork(c):
    c.probe('fork', GPUMEM_LIMIT='64MiB')


def case_report(c):
    rep = c.path('r-%r.json')
    prom = c.path('m-%r.prom')
    c.probe('report', GPUMEM_LIMIT='64MiB', GPUMEM_REPORT=rep,
            GPUMEM_PROMETHEUS=prom, RANK='3',
            PROBE_REPORT_READY=c.path('r-3.json'))
    r = load(c.path('r-3.json'))
    check(r['kind'] == 'gpumem-report' and r['rank'] == 3, r)
    check(r['reason'] == 'exit' and r['mode'] == 'limit', r)
    d = r['devices'][0]
    want = {'device': 0, 'name': 'Fake GPU', 'cap_bytes': 64 * MiB,
            'allocated_bytes': 16 * MiB, 'reserved_bytes': 16 * MiB,
            'peak_allocated_bytes': 48 * MiB,
            'peak_reserved_bytes': 48 * MiB, 'oom_count': 1,
            'oom_cap_count': 1, 'oom_verdict': 'cap',
            'last_refused_bytes': 32 * MiB, 'fragmentation': 0.0,
            'largest_free_block_bytes': 0}
    for k, v in want.items():
        check(d.get(k) == v, f'{k}: {d.get(k)} != {v}')
    with open(c.path('m-3.prom')) as f:
        text = f.read()
    for line in ['gpumem_peak_reserved_bytes{device="0",rank="3"} %d'
                 % (48 * MiB),
                 'gpumem_reserved_bytes{device="0",rank="3"} %d' % (16 * MiB),
                 'gpumem_cap_bytes{device="0",rank="3"} %d' % (64 * MiB),
                 'gpumem_oom_total{device="0",rank="3"} 1',
                 '# TYPE gpumem_oom_total counter']:
        check(line in text.splitlines(), f'missing {line!r} in\n{text}')


def case_no_cuda_no_report(c):
    rep = c.path('none.json')
    c.run(['true'], c.env(GPUMEM_REPORT=rep))
    check(not os.path.exists(rep), 'a process without CUDA wrote a report')


def case_run_no_device_note(c):
    # gpumem run with a report asked for, over a program that never
    # allocates device memory: it runs, exits 0 and writes no report, and
    # says once why (the program gpumem run started, not its children).
    rep = c.path('r.json')
    for argv in (['true'], [sys.executable, '-c', 'import subprocess; '
                            'subprocess.run(["true"]); '
                            'subprocess.run(["true"])']):
        p = c.run([c.gpumem, 'run', '--report', rep, '--'] + argv,
                  c.env(preload=False))
        check(not os.path.exists(rep), f'{argv}: wrote a report')
        check(p.stderr.count('no report written to ' + rep +
                             ': the program allocated no device memory')
              == 1, f'{argv}: {p.stderr!r}')
    # a program that sets the fake device up but allocates nothing
    p = c.run([c.gpumem, 'run', '--report', rep, '--',
               os.path.join(c.bin, 'pl_probe'), 'query'],
              c.env(preload=False, FAKECUDA_DEVICES=2))
    check('no report written to ' in p.stderr and not os.path.exists(rep),
          p.stderr)
    # a program that allocates writes its report and no such line
    p = c.run([c.gpumem, 'run', '--report', rep, '--',
               os.path.join(c.bin, 'pl_probe'), 'plain'],
              c.env(preload=False, GPUMEM_LIMIT='64MiB'))
    check(os.path.exists(rep) and 'no report written' not in p.stderr,
          p.stderr)
    # --prometheus alone, and with --report: each file not written named
    prom = c.path('m.prom')
    p = c.run([c.gpumem, 'run', '--prometheus', prom, '--', 'true'],
              c.env(preload=False))
    check(not os.path.exists(prom) and p.stderr.count(
          'no Prometheus file written to ' + prom +
          ': the program allocated no device memory') == 1, p.stderr)
    p = c.run([c.gpumem, 'run', '--report', rep, '--prometheus', prom,
               '--', 'true'], c.env(preload=False))
    check(p.stderr.count('no report written to ' + rep +
                         ' and no Prometheus file to ' + prom +
                         ': the program allocated no device memory') == 1,
          p.stderr)
    # without gpumem run (GPUMEM_REPORT set by hand) nothing is said
    os.unlink(rep)
    p = c.run(['true'], c.env(GPUMEM_REPORT=rep))
    check('no report written' not in p.stderr, p.stderr)


def case_query_no_report(c):
    # Setting devices up (cuMemGetInfo, cuDeviceTotalMem) is not using
    # them: a process that never asked for memory writes nothing.
    c.probe('query', FAKECUDA_DEVICES=2, GPUMEM_FRACTION='0.25',
            GPUMEM_REPORT=c.path('q-%r.json'),
            GPUMEM_PROMETHEUS=c.path('q-%r.prom'))
    check(os.listdir(c.tmp) == [], f'wrote {os.listdir(c.tmp)}')


def case_rank_none(c):
    # Without a rank variable %r is none-<pid>, never a rank's number.
    p = c.probe('plain', GPUMEM_LIMIT='64MiB',
                GPUMEM_REPORT=c.path('n-%r.json'),
                GPUMEM_PROMETHEUS=c.path('n-%r.prom'))
    names = sorted(os.listdir(c.tmp))
    check(len(names) == 2 and names[0].startswith('n-none-') and
          names[0].endswith('.json'), f'{names}\n{p.stderr}')
    r = load(c.path(names[0]))
    check(names[0] == f'n-none-{r["pid"]}.json' and r['rank'] is None, r)
    check([d['device'] for d in r['devices']] == [0], r['devices'])
    with open(c.path(names[1])) as f:
        text = f.read()
    check('gpumem_peak_reserved_bytes{device="0",rank="none"} %d' % MiB
          in text.splitlines(), text)


def case_launcher(c):
    # torchrun's shape: a launcher with no rank that queries every device
    # and allocates nothing, two workers (RANK=0, 1) that allocate. Only
    # the workers write, each its own file, each listing only the device
    # it allocated on; the merge has exactly their two rows.
    c.probe('launch', FAKECUDA_DEVICES=2, GPUMEM_FRACTION='0.25',
            GPUMEM_REPORT=c.path('l-%r.json'))
    names = sorted(os.listdir(c.tmp))
    check(names == ['l-0.json', 'l-1.json'], names)
    for rank in (0, 1):
        r = load(c.path(f'l-{rank}.json'))
        check(r['rank'] == rank and r['program'] == 'pl_probe', r)
        check(len(r['devices']) == 1 and
              r['devices'][0]['peak_reserved_bytes'] == MiB, r['devices'])
    p = c.run([c.gpumem, 'report', '--format', 'json'] +
              [c.path(n) for n in names], c.env(preload=False))
    m = json.loads(p.stdout)
    check([(x['rank'], x['peak_reserved_bytes']) for x in m['ranks']] ==
          [(0, MiB), (1, MiB)], m['ranks'])
    check(m['totals']['reports'] == 2 and
          m['totals']['peak_reserved_bytes'] == 2 * MiB, m['totals'])


def case_report_atomic(c):
    # Eight processes write the same report path at once (no %p, no %r)
    # while counters change: the file left is one whole report and no
    # temporary file is left behind.
    rep = c.path('same.json')
    env = c.env(GPUMEM_LIMIT='64MiB', GPUMEM_REPORT=rep, RANK='5')
    argv = [os.path.join(c.bin, 'pl_probe'), 'threads']
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for _ in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0, err)
    check(os.listdir(c.tmp) == ['same.json'], os.listdir(c.tmp))
    r = load(rep)
    check(r['rank'] == 5 and r['reason'] == 'exit' and
          r['devices'][0]['alloc_count'] > 1000, r)


def case_undersized_warn(c):
    p = c.probe('plain', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='76G', GPUMEM_CLAIMED='80GiB')
    check('undersized' in p.stderr, p.stderr)
    check(p.stdout == '', 'wrote to stdout')


def case_undersized_fail(c):
    rep = c.path('under.json')
    p = c.probe('refused', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='76G', GPUMEM_CLAIMED='80GiB',
                GPUMEM_ON_UNDERSIZED='fail', GPUMEM_REPORT=rep)
    check('GPUMEM_ON_UNDERSIZED=fail' in p.stderr, p.stderr)
    d = load(rep)['devices'][0]
    check(d['undersized'] and d['oom_verdict'] == 'undersized', d)


def case_genuine_quiet(c):
    p = c.probe('plain', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='80G', GPUMEM_CLAIMED='80GiB')
    check('undersized' not in p.stderr, p.stderr)


def case_undersized_claim_edge(c):
    """GPUMEM_CLAIMED is judged as gpumem verify judges CUDA's total: at
    most 2% below the claim (80 GiB = 81920 MiB: 80281.6 MiB)."""
    p = c.probe('plain', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='80200M', GPUMEM_CLAIMED='80GiB')
    check('undersized' in p.stderr, p.stderr)
    p = c.probe('plain', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='80300M', GPUMEM_CLAIMED='80GiB')
    check('undersized' not in p.stderr, p.stderr)


def case_undersized_catalog(c):
    """Needs the catalog built in: the name alone gives the claim."""
    p = c.probe('plain', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='76G')
    check('undersized' in p.stderr, p.stderr)


def case_linked_cu(c):
    c.run([os.path.join(c.bin, 'pl_linked_cu')], c.env(GPUMEM_LIMIT='64MiB'))


def case_libcuda_missing(c):
    # GPUMEM_LIBCUDA names no library: a program linked to libcuda is
    # capped through the libcuda.so.1 it loaded, and the warning says so
    # (every call answered CUDA_ERROR_NOT_INITIALIZED before).
    for prog in ('pl_linked_cu', 'pl_linked_rt'):
        p = c.run([os.path.join(c.bin, prog)],
                  c.env(GPUMEM_LIMIT='64MiB', GPUMEM_LIBCUDA='/nonexistent'))
        check('/nonexistent' in p.stderr and 'libcuda.so.1' in p.stderr,
              p.stderr)
    # A program that opens libcuda itself (the runtime's way) is capped too.
    c.probe('cap', GPUMEM_LIMIT='1GiB', GPUMEM_LIBCUDA='/nonexistent')


def case_linked_rt(c):
    rep = c.path('rt.json')
    c.run([os.path.join(c.bin, 'pl_linked_rt')],
          c.env(GPUMEM_LIMIT='64MiB', GPUMEM_REPORT=rep))
    d = load(rep)['devices'][0]
    # 40 MiB once (not twice: runtime and driver wrappers both saw it).
    check(d['peak_reserved_bytes'] == 40 * MiB and d['alloc_count'] == 1,
          d)


def case_linked_rt_bypass(c):
    rep = c.path('rtb.json')
    c.run([os.path.join(c.bin, 'pl_linked_rt')],
          c.env(GPUMEM_LIMIT='64MiB', GPUMEM_REPORT=rep,
                FAKECUDART_BYPASS='1'))
    d = load(rep)['devices'][0]
    check(d['peak_reserved_bytes'] == 40 * MiB and d['oom_cap_count'] == 1,
          d)


def case_pluggable(c):
    rep = c.path('plug.json')
    c.run([os.path.join(c.bin, 'pl_plug'), c.lib],
          c.env(preload=False, GPUMEM_LIMIT='64MiB', GPUMEM_REPORT=rep))
    d = load(rep)['devices'][0]
    check(d['async_bytes'] == 0 and d['peak_reserved_bytes'] == 40 * MiB
          and d['oom_cap_count'] == 1, d)


def pluggable_torch(c, mode):
    """libgpumem-torch.so throws std::bad_alloc over the cap (what()
    names the cap), and accounts like the C pair it wraps."""
    rep = c.path(f'plugt-{mode}.json')
    lib = os.path.join(c.build, 'allocator/preload/libgpumem-torch.so')
    p = c.run([os.path.join(c.bin, 'pl_plug_torch'), lib],
              c.env(preload=False, GPUMEM_MODE=mode, GPUMEM_LIMIT='64MiB',
                    GPUMEM_REPORT=rep))
    check('caught std::bad_alloc: gpumem: CUDA out of memory. Tried to '
          'allocate 40.00 MiB on device 0: over the gpumem cap of '
          '64.00 MiB' in p.stderr, p.stderr)
    d = load(rep)['devices'][0]
    check(d['peak_reserved_bytes'] == 40 * MiB and d['oom_cap_count'] == 1
          and d['oom_verdict'] == 'cap', d)


def case_pluggable_torch(c):
    pluggable_torch(c, 'limit')


def case_cache_pluggable_torch(c):
    pluggable_torch(c, 'cache')


def case_run(c):
    rep = c.path('run-%r.json')
    env = c.env(preload=False, RANK='1')
    c.run([c.gpumem, 'run', '--limit', '1GiB', '--report', rep, '--',
           os.path.join(c.bin, 'pl_probe'), 'cap'], env)
    r = load(c.path('run-1.json'))
    check(r['devices'][0]['cap_bytes'] == GiB, r)
    p = c.run([c.gpumem, 'run', '--fraction', '0.25', '--', 'sh', '-c',
               'echo "$GPUMEM_FRACTION $LD_PRELOAD"'], env)
    check(p.stdout.startswith('0.25 ') and 'libgpumem-preload.so' in
          p.stdout, p.stdout)
    # The pinned host memory cache goes next to the preload library when
    # it was built; --no-pinned leaves it out and turns it off.
    pinned = os.path.join(c.build, 'allocator/pinned/libgpumem-pinned.so')
    show = ['sh', '-c', 'echo "$LD_PRELOAD|${GPUMEM_PINNED-unset}"']
    p = c.run([c.gpumem, 'run', '--'] + show, env)
    libs = p.stdout.strip().split('|')[0].split(':')
    check(libs[0].endswith('/libgpumem-preload.so'), p.stdout)
    if os.path.exists(pinned):
        check(len(libs) == 2 and libs[1] == os.path.realpath(pinned) and
              p.stdout.strip().endswith('|unset'), p.stdout)
    p = c.run([c.gpumem, 'run', '--no-pinned', '--'] + show,
              dict(env, LD_PRELOAD='/x/other.so'))
    check(p.stdout.strip() == os.path.realpath(c.lib) + ':/x/other.so|off',
          p.stdout)
    c.run([c.gpumem, 'run', '--fraction', '2', '--', 'true'], env, 2)
    c.run([c.gpumem, 'run', '--limit', 'lots', '--', 'true'], env, 2)
    c.run([c.gpumem, 'run', '--limit', '1GiB'], env, 2)
    p = c.run([c.gpumem, 'run', '--', 'no-such-program-gpumem'], env, 127)
    check('no-such-program-gpumem' in p.stderr, p.stderr)
    p = c.run([c.gpumem, 'run', '--help'], env)
    check('--fraction' in p.stdout, p.stdout)


def case_run_split_path(c):
    # LD_PRELOAD splits at spaces and colons: gpumem run refuses such a
    # library path rather than run the program uncapped.
    import shutil
    for d in ('with space', 'with:colon'):
        os.makedirs(c.path(d))
        lib = os.path.join(c.path(d), 'libgpumem-preload.so')
        shutil.copy(c.lib, lib)
        mark = c.path('ran')
        for var in ('GPUMEM_PRELOAD_LIBRARY', 'GPUMEM_PINNED_LIBRARY'):
            env = c.env(preload=False, **{var: lib})
            p = c.run([c.gpumem, 'run', '--limit', '64MiB', '--', 'touch',
                       mark], env, 2)
            check('LD_PRELOAD' in p.stderr and lib in p.stderr and
                  not os.path.exists(mark), p.stderr)


def case_run_unloadable(c):
    # A library the dynamic linker does not load (here not an ELF object)
    # is skipped by ld.so with a message and the program would run
    # uncapped: gpumem run checks the load first and refuses.
    bad = c.path('libgpumem-preload.so')
    with open(bad, 'w') as f:
        f.write('not a shared object\n')
    mark = c.path('ran')
    p = c.run([c.gpumem, 'run', '--limit', '64MiB', '--', 'touch', mark],
              c.env(preload=False, GPUMEM_PRELOAD_LIBRARY=bad), 2)
    check('did not load' in p.stderr and not os.path.exists(mark),
          p.stderr)
    # A path that is not there is said to be not there, for either
    # library (the pinned one too: the user named it, so it is not
    # passed over), and the program is not run.
    for var in ('GPUMEM_PRELOAD_LIBRARY', 'GPUMEM_PINNED_LIBRARY'):
        p = c.run([c.gpumem, 'run', '--limit', '64MiB', '--', 'touch',
                   mark], c.env(preload=False, **{var: '/nonexistent.so'}),
                  2)
        check(var + '=/nonexistent.so: cannot read it: No such file or '
              'directory' in p.stderr and 'set ' + var not in p.stderr and
              not os.path.exists(mark), p.stderr)


def case_report_merge(c):
    env = c.env(preload=False)
    for rank in (0, 1):
        c.probe('plain', GPUMEM_LIMIT='64MiB', RANK=rank,
                GPUMEM_REPORT=c.path('m-%r.json'))
    verify = c.path('verify-node2.json')
    with open(verify, 'w') as f:
        json.dump({'kind': 'gpumem-verify', 'host': 'node2', 'devices': [
            {'device': 0, 'name': 'NVIDIA H200', 'claimed_bytes': 141 * GiB,
             'reported_bytes': 143155 * MiB, 'verified_bytes': 143155 * MiB,
             'errors': 0, 'verdict': 'ok', 'bandwidth_gbps': 4220.5}]}, f)
    files = [c.path('m-0.json'), c.path('m-1.json'), verify]
    p = c.run([c.gpumem, 'report', '--format', 'json'] + files, env)
    m = json.loads(p.stdout)
    check(m['kind'] == 'gpumem-report-merged', m)
    check([r['rank'] for r in m['ranks']] == [0, 1], m['ranks'])
    check(m['ranks'][0]['peak_reserved_bytes'] == MiB, m['ranks'][0])
    check(m['totals']['peak_reserved_bytes'] == 2 * MiB, m['totals'])
    check(m['verify'][0]['host'] == 'node2' and
          m['verify'][0]['verdict'] == 'ok', m['verify'])
    p = c.run([c.gpumem, 'report'] + files, env)
    check('peak reserved' in p.stdout.lower() and 'node2' in p.stdout,
          p.stdout)
    # the 64 MiB caps as 64.00 MiB (not 0.06 GiB); both kinds counted
    check('64.00 MiB' in p.stdout and '0.06 GiB' not in p.stdout,
          p.stdout)
    check(m['totals']['reports'] == 2 and
          m['totals']['verify_reports'] == 1, m['totals'])
    bad = c.path('bad.json')
    with open(bad, 'w') as f:
        f.write('{"kind": "gpumem-report", "devices": [')
    p = c.run([c.gpumem, 'report', bad], env, 2)
    check(bad in p.stderr, p.stderr)
    c.run([c.gpumem, 'report', c.path('missing.json')], env, 2)
    c.run([c.gpumem, 'report'], env, 2)


# ==== GPUMEM_MODE=cache ====

def case_cache_reuse(c):
    rep = c.path('cr.json')
    c.probe('cache_reuse', GPUMEM_MODE='cache', GPUMEM_LIMIT='1GiB',
            GPUMEM_REPORT=rep)
    r = load(rep)
    d = r['devices'][0]
    check(r['mode'] == 'cache', r)
    check(d['alloc_count'] == 101 and d['free_count'] == 101, d)
    check(d['reserved_bytes'] == 20 * MiB and d['allocated_bytes'] == 0, d)
    check(d['pool']['num_device_alloc'] == 1, d['pool'])


def case_cache_streams(c):
    c.probe('cache_streams', GPUMEM_MODE='cache')


def case_cache_cap(c):
    rep = c.path('cc.json')
    c.probe('cache_cap', GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
            GPUMEM_REPORT=rep)
    d = load(rep)['devices'][0]
    check(d['peak_reserved_bytes'] == 64 * MiB, d)
    check(d['oom_cap_count'] == 3 and d['oom_verdict'] == 'cap', d)
    check(d['allocated_bytes'] == 0 and d['vmm_bytes'] == 0, d)
    # What the pool still caches is reserved, and is the pool's.
    check(d['reserved_bytes'] == d['pool_reserved_bytes'] ==
          d['pool_free_bytes'], d)


def case_cache_frag(c):
    rep = c.path('cf-%r.json')
    prom = c.path('cf-%r.prom')
    c.probe('cache_frag', GPUMEM_MODE='cache', GPUMEM_LIMIT='20MiB',
            GPUMEM_REPORT=rep, GPUMEM_PROMETHEUS=prom, RANK='2')
    r = load(c.path('cf-2.json'))
    d = r['devices'][0]
    check(r['mode'] == 'cache', r)
    want = {'reserved_bytes': 20 * MiB, 'allocated_bytes': 4 * MiB,
            'peak_allocated_bytes': 12 * MiB, 'peak_reserved_bytes': 20 * MiB,
            'pool_reserved_bytes': 20 * MiB, 'pool_allocated_bytes': 4 * MiB,
            'pool_free_bytes': 16 * MiB,
            'largest_free_block_bytes': 12 * MiB, 'fragmentation': 0.25,
            'oom_count': 1, 'oom_cap_count': 1,
            'oom_verdict': 'fragmentation', 'last_refused_bytes': 14 * MiB,
            'cap_bytes': 20 * MiB}
    for k, v in want.items():
        check(d.get(k) == v, f'{k}: {d.get(k)} != {v}')
    check(d['pool']['reserved_bytes'] == 20 * MiB, d['pool'])
    check(d['pool_oom']['requested_bytes'] == 14 * MiB, d['pool_oom'])
    with open(c.path('cf-2.prom')) as f:
        text = f.read()
    for line in ['gpumem_reserved_bytes{device="0",rank="2"} %d' % (20 * MiB),
                 'gpumem_allocated_bytes{device="0",rank="2"} %d' % (4 * MiB),
                 'gpumem_pool_free_bytes{device="0",rank="2"} %d'
                 % (16 * MiB),
                 'gpumem_largest_free_block_bytes{device="0",rank="2"} %d'
                 % (12 * MiB)]:
        check(line in text.splitlines(), f'missing {line!r} in\n{text}')


def case_cache_info(c):
    # Cache mode: cuMemGetInfo's free is what one request can get. A
    # 65 MiB cap: 65 MiB needs a 66 MiB segment (2 MiB rounding), 64 MiB
    # fits; 15 MiB: 14 MiB; 9 MiB: only small requests (2 MiB segments),
    # the 1-10 MiB ones share 20 MiB segments.
    for cap, free in (('65MiB', 64 * MiB), ('15MiB', 14 * MiB),
                      ('9MiB', MiB), ('64MiB', 64 * MiB)):
        c.probe('cache_info', GPUMEM_MODE='cache', GPUMEM_LIMIT=cap,
                PROBE_FREE=free)


def case_cache_foreign(c):
    c.probe('cache_foreign', GPUMEM_MODE='cache')


def case_cache_threads(c):
    rep = c.path('ct.json')
    c.probe('cache_threads', GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
            GPUMEM_REPORT=rep)
    d = load(rep)['devices'][0]
    check(d['peak_reserved_bytes'] <= 64 * MiB, d)
    check(d['allocated_bytes'] == 0 and d['pool_allocated_bytes'] == 0, d)
    check(d['alloc_count'] == d['free_count'] and d['alloc_count'] > 1000,
          d)


def case_cache_linked(c):
    for prog in ('pl_linked_cu', 'pl_linked_rt'):
        rep = c.path(prog + '.json')
        c.run([os.path.join(c.bin, prog)],
              c.env(GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
                    GPUMEM_REPORT=rep))
        d = load(rep)['devices'][0]
        # One 40 MiB segment, counted once, cached after the free.
        check(d['peak_reserved_bytes'] == 40 * MiB and
              d['alloc_count'] == 1 and d['pool_free_bytes'] == 40 * MiB,
              d)


def case_cache_pluggable(c):
    rep = c.path('cplug.json')
    c.run([os.path.join(c.bin, 'pl_plug'), c.lib],
          c.env(preload=False, GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
                GPUMEM_REPORT=rep))
    d = load(rep)['devices'][0]
    check(d['async_bytes'] == 0 and d['peak_reserved_bytes'] == 40 * MiB
          and d['oom_cap_count'] == 1 and d['alloc_count'] == 2 and
          d['pool_reserved_bytes'] == 40 * MiB, d)


# ==== GPUMEM_MODE=cache with PyTorch's expandable_segments:True ====

VSEG = 'expandable_segments:True'


def case_cache_vseg(c):
    rep = c.path('cv-%r.json')
    prom = c.path('cv-%r.prom')
    p = c.probe('cache_vseg', GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
                PYTORCH_CUDA_ALLOC_CONF=' max_split_size_mb:128, '
                'roundup_power2_divisions:[256:1,>:4],' + VSEG,
                GPUMEM_REPORT=rep, GPUMEM_PROMETHEUS=prom, RANK='0')
    check('PYTORCH' not in p.stderr, p.stderr)
    d = load(c.path('cv-0.json'))['devices'][0]
    check(d['pool_virtual_segments'] is True, d)
    # The pool's granules are the pool's reserved bytes, not a program's
    # own VMM handles; what it caches at the end is reserved.
    want = {'peak_reserved_bytes': 64 * MiB, 'reserved_bytes': 64 * MiB,
            'pool_reserved_bytes': 64 * MiB, 'pool_free_bytes': 64 * MiB,
            'allocated_bytes': 0, 'vmm_bytes': 0, 'managed_bytes': 0,
            'oom_cap_count': 2}
    for k, v in want.items():
        check(d.get(k) == v, f'{k}: {d.get(k)} != {v}')
    check(d['pool']['num_device_alloc'] >= 3, d['pool'])
    with open(c.path('cv-0.prom')) as f:
        text = f.read()
    line = 'gpumem_reserved_bytes{device="0",rank="0"} %d' % (64 * MiB)
    check(line in text.splitlines(), f'missing {line!r} in\n{text}')


def case_cache_vseg_threads(c):
    rep = c.path('cvt.json')
    c.probe('cache_vseg_threads', GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
            FAKECUDA_FREE_DELAY_US=300, PYTORCH_CUDA_ALLOC_CONF=VSEG,
            GPUMEM_REPORT=rep)
    d = load(rep)['devices'][0]
    check(d['pool_virtual_segments'] is True, d)
    check(d['peak_reserved_bytes'] <= 64 * MiB and d['oom_cap_count'] > 0,
          d)
    check(d['allocated_bytes'] == 0 and d['managed_bytes'] == 0 and
          d['reserved_bytes'] == d['pool_reserved_bytes'], d)


def plain_pool(c, why, **env):
    # cache_reuse sees one 20 MiB plain segment; the report says plain,
    # and stderr says why, once.
    rep = c.path('plain.json')
    p = c.probe('cache_reuse', GPUMEM_MODE='cache', GPUMEM_LIMIT='1GiB',
                GPUMEM_REPORT=rep, **env)
    check(p.stderr.count('gpumem') == 1 and why in p.stderr and
          'plain segments' in p.stderr, p.stderr)
    check(load(rep)['devices'][0]['pool_virtual_segments'] is False,
          load(rep))


def case_cache_vseg_fallback(c):
    # A device without virtual memory management: plain segments.
    plain_pool(c, 'no virtual memory management',
               PYTORCH_CUDA_ALLOC_CONF=VSEG, FAKECUDA_NO_VMM=1)


def case_cache_vseg_conf(c):
    # What PyTorch refuses is a warning and plain segments.
    for v, why in (('expandable_segments:true',
                    'expandable_segments:true is not True or False'),
                   ('expandable_segments:1', 'expandable_segments:1 is'),
                   ('expandable_segments', 'has no'),
                   ('expandable_segments:True;max_split_size_mb:64',
                    'is not True or False'),
                   ('max_split_size_mb:[64,' + VSEG, "no closing ']'"),
                   (VSEG + ',,', "where a key was expected")):
        plain_pool(c, why, PYTORCH_CUDA_ALLOC_CONF=v)
    # False, the last setting winning, and PYTORCH_ALLOC_CONF only when
    # PYTORCH_CUDA_ALLOC_CONF is unset.
    for env in ({'PYTORCH_CUDA_ALLOC_CONF': VSEG +
                 ',expandable_segments:False'},
                {'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:64',
                 'PYTORCH_ALLOC_CONF': VSEG}):
        rep = c.path('f.json')
        p = c.probe('cache_reuse', GPUMEM_MODE='cache', GPUMEM_LIMIT='1GiB',
                    GPUMEM_REPORT=rep, **env)
        check('gpumem' not in p.stderr, p.stderr)
        check(load(rep)['devices'][0]['pool_virtual_segments'] is False,
              env)
    rep = c.path('alloc-conf.json')
    c.probe('cache_vseg', GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
            PYTORCH_ALLOC_CONF=VSEG, GPUMEM_REPORT=rep)
    check(load(rep)['devices'][0]['pool_virtual_segments'] is True,
          load(rep))
    # Limit mode leaves the setting to PyTorch: not read, no warning.
    p = c.probe('cap', GPUMEM_LIMIT='1GiB',
                PYTORCH_CUDA_ALLOC_CONF='expandable_segments:maybe')
    check('expandable' not in p.stderr, p.stderr)


def case_cache_vseg_pluggable(c):
    # The CUDAPluggableAllocator pair: PyTorch's own allocator is not
    # there to read the setting, the pool does.
    rep = c.path('cvplug.json')
    c.run([os.path.join(c.bin, 'pl_plug'), c.lib],
          c.env(preload=False, GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB',
                PYTORCH_CUDA_ALLOC_CONF=VSEG, GPUMEM_REPORT=rep))
    d = load(rep)['devices'][0]
    check(d['pool_virtual_segments'] is True and d['async_bytes'] == 0 and
          d['peak_reserved_bytes'] == 40 * MiB and
          d['oom_cap_count'] == 1 and d['alloc_count'] == 2 and
          d['pool_reserved_bytes'] == 40 * MiB and
          d['pool']['num_device_alloc'] >= 1, d)


def oom_lines(p):
    return [ln for ln in p.stderr.splitlines()
            if ln.startswith('gpumem: ') and
            'out of memory on device' in ln]


def case_oom_line(c):
    # A refused allocation is explained on stderr, once, in PyTorch's
    # manner: asked, cap, allocated, reserved, what is free, verdict.
    # Limit mode caches nothing: no free block (the report's
    # largest_free_block_bytes is 0), only the room under the cap.
    p = c.probe('cap', GPUMEM_LIMIT='1GiB',
                GPUMEM_REPORT=c.path('cap.json'))
    lines = oom_lines(p)
    check(len(lines) == 1, p.stderr)
    check('tried to allocate 600.00 MiB; cap 1.00 GiB, 512.00 MiB '
          'allocated, 512.00 MiB reserved, 512.00 MiB free under the cap: '
          'cap (' in lines[0] and 'block' not in lines[0], lines[0])
    dev = load(c.path('cap.json'))['devices'][0]
    check(dev['largest_free_block_bytes'] == 0, dev)
    # the driver's own out of memory: the card is full
    p = c.probe('errors', GPUMEM_LIMIT='64MiB', FAKECUDA_FAIL_ALLOC='2')
    lines = oom_lines(p)
    check(len(lines) == 1 and 'tried to allocate 1.00 MiB' in lines[0] and
          ': card full (' in lines[0], p.stderr)
    # an undersized card refused by GPUMEM_ON_UNDERSIZED=fail
    p = c.probe('refused', FAKECUDA_NAME='NVIDIA A100-SXM4-80GB',
                FAKECUDA_TOTAL='76G', GPUMEM_CLAIMED='80GiB',
                GPUMEM_ON_UNDERSIZED='fail')
    lines = oom_lines(p)
    check(len(lines) == 1 and ': undersized card (' in lines[0], p.stderr)
    # cache mode: free cached bytes, no block that large
    p = c.probe('cache_frag', GPUMEM_MODE='cache', GPUMEM_LIMIT='20MiB')
    lines = oom_lines(p)
    check(len(lines) == 1 and 'tried to allocate 14.00 MiB; cap 20.00 MiB, '
          '4.00 MiB allocated, 20.00 MiB reserved, largest free block '
          '12.00 MiB, 0 B free under the cap: fragmentation (' in lines[0],
          p.stderr)


def case_oom_burst(c):
    # Three refusals within milliseconds are one burst: one line.
    p = c.probe('cache_cap', GPUMEM_MODE='cache', GPUMEM_LIMIT='64MiB')
    lines = oom_lines(p)
    check(len(lines) == 1 and 'tried to allocate 30.00 MiB' in lines[0] and
          ': cap (' in lines[0], p.stderr)


def case_run_report_path(c):
    # gpumem run: a report or metrics path that cannot be written fails
    # at start (exit 2, naming the option), before the program runs.
    mark = c.path('ran')
    for opt, path, why in (
            ('--report', '/nonexistent/r.json', 'No such file or directory'),
            ('--prometheus', c.tmp, 'is a directory'),
            ('--report', os.path.join(mark, 'x', 'r.json'),
             'No such file or directory')):
        p = c.run([c.gpumem, 'run', opt, path, '--', 'touch', mark],
                  c.env(preload=False), expect=2)
        check(f'gpumem run: {opt}' in p.stderr and why in p.stderr,
              p.stderr)
        check(not os.path.exists(mark), 'the program ran')


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    fn = globals().get('case_' + sys.argv[1])
    if not fn:
        print('no case', sys.argv[1])
        return 2
    fn(Ctx(sys.argv[2]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
