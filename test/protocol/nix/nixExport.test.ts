// The export stream, .drv ATerm and content-addressed path computations against real Nix: a
// derivation with an input derivation, a source added by hash and a toFile text is instantiated,
// its closure exported, and every path recomputed from its bytes.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { narFileContents, parseDerivation, parseNixExport, sourceStorePath, textStorePath } from '../../../protocol/index.js';
import { nixEnv, requireNix } from '../../support/nixStore.js';
import { exportStream, syntheticDrv, textFile } from '../../support/directClosure.js';

requireNix();

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { env: nixEnv(), maxBuffer: 1 << 28 });

t.test('a real closure: paths, references, derivations and content addresses', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-export-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const nonce = randomBytes(6).toString('hex');
  writeFileSync(join(dir, 'script.sh'), `echo ${nonce}\n`);
  writeFileSync(join(dir, 'd.nix'), `let
    dep = derivation { name = "kiln-x-dep"; system = "x86_64-linux"; builder = "/bin/sh"; args = ["-c" "echo ${nonce} > $out"]; };
    src = builtins.path { path = ./script.sh; name = "kiln-x-script"; };
    txt = builtins.toFile "kiln-x-note" "see \${src}\\n\\"quoted\\"\\ttab";
  in derivation { name = "kiln-x-top"; system = "x86_64-linux"; builder = "/bin/sh"; args = ["-c" "cat \${src} \${txt} > $out"]; inherit dep; }`);
  const drv = run('nix-instantiate', [join(dir, 'd.nix')]).toString().trim();
  const closure = run('nix-store', ['-qR', drv]).toString().trim().split('\n');
  const parsed = parseNixExport(run('nix-store', ['--export', ...closure]));
  if (!parsed.ok) throw new Error(parsed.reason);
  t.same(parsed.value.map((p) => p.path).sort(), [...closure].sort());
  for (const p of parsed.value) {
    const name = p.path.slice(44);
    const refs = p.references.filter((r) => r !== p.path);
    const contents = narFileContents(p.nar);
    const text = contents ? textStorePath(name, contents, refs) : null;
    const source = sourceStorePath(name, p.nar, refs, p.references.includes(p.path));
    t.ok(text === p.path || source === p.path, `${name} is recomputed from its bytes`);
    t.same(p.references.sort(), run('nix-store', ['-q', '--references', p.path]).toString().trim().split('\n').filter(Boolean).sort(), `${name} references`);
  }
  const top = parsed.value.find((p) => p.path === drv)!;
  const derivation = parseDerivation(narFileContents(top.nar)!.toString());
  if (!derivation.ok) throw new Error(derivation.reason);
  const shown = JSON.parse(run('nix', ['--extra-experimental-features', 'nix-command', 'show-derivation', drv]).toString())[drv];
  t.same(derivation.value.inputDrvs, shown.inputDrvs);
  t.same(derivation.value.inputSrcs, shown.inputSrcs);
  t.same(derivation.value.env, shown.env);
  t.same(derivation.value.args, shown.args);
  t.equal(derivation.value.outputs['out']!.path, shown.outputs.out.path);
});

t.test('the synthetic closures the HTTP tests use parse and verify the same way', async (t) => {
  const note = textFile('note', 'hello "world"\n');
  const dep = syntheticDrv('dep');
  const top = syntheticDrv('top', { inputDrvs: [dep], inputSrcs: [note.path] });
  const parsed = parseNixExport(exportStream([note, dep, top]));
  if (!parsed.ok) throw new Error(parsed.reason);
  t.equal(parsed.value.length, 3);
  const drv = parseDerivation(narFileContents(parsed.value[2]!.nar)!.toString());
  t.ok(drv.ok && drv.value.inputDrvs[dep.drvPath]);
  t.equal(textStorePath('top.drv', narFileContents(top.nar)!, top.references), top.drvPath);
});

t.test('malformed export streams name the problem', async (t) => {
  const good = exportStream([textFile('a', 'x')]);
  const cases: [string, Buffer, RegExp][] = [
    ['empty', Buffer.alloc(0), /truncated/],
    ['truncated', good.subarray(0, good.length - 12), /truncated/],
    ['trailing bytes', Buffer.concat([good, Buffer.alloc(8)]), /follow the end/],
    ['bad marker', Buffer.concat([Buffer.from([2, 0, 0, 0, 0, 0, 0, 0]), good.subarray(8)]), /expected 1/],
    ['not a NAR', Buffer.concat([good.subarray(0, 8), Buffer.from([5, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('hello\0\0\0')]), /expected "nix-archive-1"/],
    ['huge string', Buffer.concat([good.subarray(0, 8), Buffer.from([0, 0, 0, 0, 0, 0, 0x10, 0])]), /too large|exceeds/],
  ];
  for (const [label, bytes, reason] of cases) {
    const parsed = parseNixExport(bytes);
    t.notOk(parsed.ok, label);
    if (!parsed.ok) t.match(parsed.reason, reason, label);
  }
  const badDrv = parseDerivation('Derive([("out","/nix/store/x","","")],[],[],"x86_64-linux","/bin/sh",[],[("a","b")]) trailing');
  t.notOk(badDrv.ok);
  t.notOk(parseDerivation('Derive([],[],[],"s","b",[],[])').ok, 'no outputs');
  t.notOk(parseDerivation('Derive([("out","/p","","")],[],[],"s","b",["unterminated],[])').ok);
});
