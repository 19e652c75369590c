import t from 'tap';
import { classifyBuildFailure, classifyEvalFailure } from '../../worker/index.js';

const drv = '/nix/store/zxpj9a9zsyf2x4kyavr9h6qknfkyn438-wexp-broken.drv';

t.test('nix-store --realise failures map to the spec table', async (t) => {
  const cases: [string, { exitCode: number | null; signal?: string | null; errorText: string; fixedOutput?: boolean }, string, string][] = [
    ['builder exit code', { exitCode: 100, errorText: `builder for '${drv}' failed with exit code 3;\nlast 1 log lines:\n> about to fail` }, 'FailedPermanent', 'builder_failed'],
    ['a download failing', { exitCode: 100, errorText: `builder for '${drv}' failed with exit code 1`, fixedOutput: true }, 'FailedTransient', 'network'],
    ['total time', { exitCode: 101, errorText: `building of '${drv}!*' from .drv file timed out after 2 seconds` }, 'FailedTimeout', 'timeout'],
    ['silence', { exitCode: 101, errorText: `building of '${drv}!*' from .drv file timed out after 2 seconds of silence` }, 'FailedTimeout', 'max_silent'],
    ['timeout with --keep-going bits', { exitCode: 103, errorText: 'timed out after 5 seconds' }, 'FailedTimeout', 'timeout'],
    ['hash mismatch', { exitCode: 102, errorText: `hash mismatch in fixed-output derivation '${drv}':\n specified: sha256-A\n got: sha256-B` }, 'FailedPermanent', 'hash_mismatch'],
    ['killed builder', { exitCode: 100, errorText: `builder for '${drv}' failed due to signal 9 (Killed)` }, 'FailedTransient', 'builder_crashed'],
    ['disk full', { exitCode: 1, errorText: 'writing to file: No space left on device' }, 'FailedTransient', 'disk_full'],
    ['out of memory', { exitCode: 1, errorText: 'std::bad_alloc' }, 'FailedTransient', 'out_of_memory'],
    ['an input missing', { exitCode: 1, errorText: "unable to start any build; either increase '--max-jobs' or enable remote builds." }, 'FailedTransient', 'inputs_unavailable'],
    ['substitution', { exitCode: 1, errorText: "some substitutes for the outputs of derivation '/nix/store/x.drv' failed (usually happens due to networking issues)" }, 'FailedTransient', 'substitution_failed'],
    ['network', { exitCode: 1, errorText: "unable to download 'https://cache.example/nar/x': Couldn't resolve host name (6)" }, 'FailedTransient', 'network'],
    ['a dependency failed', { exitCode: 100, errorText: `1 dependencies of derivation '${drv}' failed to build` }, 'FailedTransient', 'inputs_unavailable'],
    ['nix-store killed', { exitCode: null, signal: 'SIGKILL', errorText: '' }, 'FailedTransient', 'builder_crashed'],
    ['anything else', { exitCode: 1, errorText: 'something new' }, 'FailedTransient', 'worker_error'],
  ];
  for (const [name, outcome, klass, reason] of cases) {
    const failure = classifyBuildFailure({ signal: null, ...outcome });
    t.equal(failure.class, klass, `${name}: class`);
    t.equal(failure.reason, reason, `${name}: reason`);
  }
  t.equal(classifyBuildFailure({ exitCode: 100, signal: null, errorText: `builder for '${drv}' failed with exit code 3` }).exitCode, 3, 'the builder\'s own exit code');
});

t.test('evaluation failures are the expression\'s fault unless the environment says otherwise', async (t) => {
  t.match(classifyEvalFailure("attribute 'foo' missing"), { class: 'FailedPermanent', reason: 'eval_error' });
  t.match(classifyEvalFailure("path '/nix/store/abc-src' is not valid"), { class: 'FailedPermanent', reason: 'eval_error' });
  t.match(classifyEvalFailure('unable to download https://github.com/x: Could not resolve host'), { class: 'FailedTransient', reason: 'network' });
  t.match(classifyEvalFailure(''), { reason: 'eval_error', message: /without a message/ });
});
