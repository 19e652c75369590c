// Which locked flake inputs an evaluation may fetch: remote sources and store paths, never the
// worker's own files. Pure, so every case of the allow list is checked here, and flakeLock.test.ts
// checks with real Nix that a refusal stops the evaluation.
import t from 'tap';
import { refusalOf, refusedInputs, type FlakeLocks } from '../../worker/flakeInputPolicy.js';

t.test('remote sources and store paths are allowed', async (t) => {
  for (const locked of [
    { type: 'github', owner: 'NixOS', repo: 'nixpkgs', rev: 'a'.repeat(40) },
    { type: 'gitlab', owner: 'o', repo: 'r', rev: 'b'.repeat(40) },
    { type: 'sourcehut', owner: '~o', repo: 'r', rev: 'c'.repeat(40) },
    { type: 'git', url: 'https://example.org/r.git', rev: 'd'.repeat(40) },
    { type: 'git', url: 'ssh://git@example.org/r.git', rev: 'd'.repeat(40) },
    { type: 'git', url: 'git://example.org/r.git', rev: 'd'.repeat(40) },
    { type: 'hg', url: 'http://example.org/r', rev: 'e'.repeat(40) },
    { type: 'tarball', url: 'https://example.org/r.tar.gz', narHash: 'sha256-x' },
    { type: 'file', url: 'https://example.org/f', narHash: 'sha256-x' },
    { type: 'path', path: '/nix/store/00000000000000000000000000000000-source', narHash: 'sha256-x' },
    { type: 'path', path: '/nix/store/00000000000000000000000000000000-source/sub', narHash: 'sha256-x' },
  ]) t.equal(refusalOf(locked), null, JSON.stringify(locked));
});

t.test('local sources and unknown types are refused, with the reason', async (t) => {
  const cases: [Record<string, unknown> | undefined, RegExp][] = [
    [{ type: 'path', path: '/var/lib/kiln/secrets', narHash: 'sha256-x' }, /local path "\/var\/lib\/kiln\/secrets", outside \/nix\/store/],
    [{ type: 'path', path: '/nix/store/../etc', narHash: 'sha256-x' }, /outside \/nix\/store/],
    [{ type: 'path', path: 'nix/store/x', narHash: 'sha256-x' }, /outside/],
    [{ type: 'path', path: '/nix/storex/x', narHash: 'sha256-x' }, /outside/],
    [{ type: 'git', url: 'file:///var/lib/kiln-worker/repos/x', rev: 'a'.repeat(40) }, /git source at "file:/],
    [{ type: 'hg', url: 'file:///srv/hg', rev: 'a'.repeat(40) }, /hg source/],
    [{ type: 'tarball', url: 'file:///etc/shadow.tar', narHash: 'sha256-x' }, /tarball source/],
    [{ type: 'file', url: 'file:///etc/passwd', narHash: 'sha256-x' }, /file source/],
    [{ type: 'git', url: '/var/lib/kiln-worker/repos/x', rev: 'a'.repeat(40) }, /not over http/],
    [{ type: 'indirect', id: 'nixpkgs' }, /type "indirect" is not one kiln fetches/],
    [{ type: 'mercurial' }, /not one kiln fetches/],
    [{}, /type "" is not/],
    [undefined, /not locked/],
  ];
  for (const [locked, reason] of cases) t.match(refusalOf(locked), reason, JSON.stringify(locked));
});

t.test('refused inputs are named by their input path, follows included', async (t) => {
  const locks: FlakeLocks = {
    root: 'root',
    nodes: {
      root: { inputs: { nixpkgs: 'nixpkgs', tool: 'tool', same: ['tool', 'loot'] } },
      nixpkgs: { locked: { type: 'github', owner: 'NixOS', repo: 'nixpkgs', rev: 'a'.repeat(40) } },
      tool: { inputs: { loot: 'loot_2', nixpkgs: ['nixpkgs'] }, locked: { type: 'git', url: 'https://example.org/tool', rev: 'b'.repeat(40) } },
      loot_2: { locked: { type: 'path', path: '/home/worker/.ssh', narHash: 'sha256-x' } },
      stray: { locked: { type: 'git', url: 'file:///srv/x', rev: 'c'.repeat(40) } },
    },
  };
  t.same(refusedInputs(locks).map((r) => r.input), ['tool/loot', 'stray'], 'a nested input by its path, an unreachable node by its key');
  t.same(refusedInputs({ root: 'root', nodes: { root: {} } }), [], 'a flake without inputs');
});
