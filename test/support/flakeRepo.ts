// A git repository made in a test, holding a flake, for workers to fetch over file://.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface FlakeRepo {
  dir: string;
  url: string;
  commit: string;
}

const git = (dir: string, args: string[]) =>
  execFileSync('git', ['-C', dir, '-c', 'user.email=test@kiln.invalid', '-c', 'user.name=kiln test', ...args], { encoding: 'utf8' }).trim();

export function createFlakeRepo(dir: string, files: Record<string, string>): FlakeRepo {
  mkdirSync(dir, { recursive: true });
  execFileSync('git', ['init', '--quiet', '-b', 'main', dir]);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  git(dir, ['add', '.']);
  git(dir, ['commit', '--quiet', '-m', 'flake']);
  return { dir, url: `file://${dir}`, commit: git(dir, ['rev-parse', 'HEAD']) };
}

/**
 * A flake without inputs whose `packages.x86_64-linux` is the `rec` attribute set `packages`, in
 * which `mk name script` is a derivation running `script` with /bin/sh (Nix 2.8 builders get an
 * empty PATH). `nonce` goes into every derivation so each test run builds afresh instead of
 * finding old outputs.
 */
export function shellFlake(nonce: string, packages: string): string {
  return `{
  outputs = { self }: let
    system = "x86_64-linux";
    mk = name: script: derivation {
      inherit name system;
      builder = "/bin/sh";
      args = [ "-c" script ];
      PATH = "/bin:/usr/bin";
      nonce = "${nonce}";
    };
  in {
    packages.\${system} = rec {
${packages}
    };
  };
}
`;
}

/** The flake most scheduler tests evaluate: a dependency chain, a failure, slow builds and attributes that do not evaluate. */
export function testFlake(nonce: string): string {
  return shellFlake(nonce, `      base = mk "kiln-test-base" "echo building base; mkdir $out; echo base > $out/data";
      app = mk "kiln-test-app" "echo building app; mkdir $out; echo \${base} > $out/base-path; cat \${base}/data > $out/copied";
      broken = mk "kiln-test-broken" "echo about to fail; exit 3";
      slow = mk "kiln-test-slow" "echo slow starts; sleep 60; touch $out";
      quiet = mk "kiln-test-quiet" "echo quiet starts; sleep 60; touch $out";
      bad = throw "this attribute does not evaluate";
      skipped = throw "an excluded attribute is never evaluated";
      notADerivation = "a string";`);
}
