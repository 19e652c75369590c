// Run by `npm ci`/`npm install` (package.json's postinstall): guards postgres.js against statements
// written to a connection that has closed (docs/database.md, "A connection lost inside a
// transaction"). In postgres.js 3.4.9 a statement issued on a reserved connection or inside
// sql.begin after the session ended (PostgreSQL restarted, the backend terminated) is written to a
// socket that is gone: the write throws from a timer and ends the process (porsager/postgres#1208,
// unfixed upstream), or, once the pool has reconnected that connection for another query, it runs
// in that other session, outside the transaction it belonged to. Patched, such a statement is
// refused with CONNECTION_CLOSED, as a statement in flight when the connection closed already is.
// Each edit is found by its exact text; an unknown version or text stops the install, so an upgrade
// of postgres.js makes this script be looked at again rather than silently not apply.
import { readFileSync, writeFileSync } from 'node:fs';

const VERSION = '3.4.9';
const MARK = '/* kiln: closed-connection guard */';
const root = new URL('../node_modules/postgres/', import.meta.url);
// A handle's statements go out only while its connection still holds the reservation it was given:
// the connection's close clears it (and a later reserve or begin on the reconnected connection sets
// another), so a statement of a lost transaction can neither reach a dead socket nor another session.
const refusal = `${MARK} if (c.reserved !== reservation) return q.reject(Errors.connection('CONNECTION_CLOSED', options))`;

const edits = {
  'src/index.js': [
    // sql.reserve(): the reservation is the function set here, cleared by release() and by the close
    ['    c.reserved.release = true\n', `    c.reserved.release = true\n    ${MARK} const reservation = c.reserved\n`],
    ['    function handler(q) {\n      c.queue === full\n        ? queue.push(q)', `    function handler(q) {\n      ${refusal}\n      c.queue === full\n        ? queue.push(q)`],
    // sql.begin(): set when its begin executed (before any scope), cleared by the close or the commit's idle ReadyForQuery
    ['    async function scope(c, fn, name) {\n', `    async function scope(c, fn, name) {\n      ${MARK} const reservation = c.reserved\n`],
    ['      function handler(q) {\n        q.catch(e => uncaughtError || (uncaughtError = e))', `      function handler(q) {\n        ${refusal}\n        q.catch(e => uncaughtError || (uncaughtError = e))`],
  ],
  'src/connection.js': [
    // a COPY's stream destroyed by the close (its socket already gone) threw out of closed() before
    // the connection was handed back to the pool
    ['        socket.write(b().f().str(error + b.N).end())\n', `        ${MARK} socket && socket.write(b().f().str(error + b.N).end())\n`, 2], // COPY in and COPY both
    // and a write that still finds no socket settles what waits on it instead of throwing from a timer
    ['  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)', `  function nextWrite(fn) {\n    ${MARK} if (socket === null) return (chunk = nextWriteTimer = null, error(Errors.connection('CONNECTION_CLOSED', options)), false)\n    const x = socket.write(chunk, fn)`],
  ],
};

const { version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
if (version !== VERSION) {
  console.error(`bin/patchPostgres.js: postgres ${version} is installed, the guard was written for ${VERSION}: check whether it is still needed and update the script`);
  process.exit(1);
}
for (const [file, replacements] of Object.entries(edits)) {
  const url = new URL(file, root);
  let text = readFileSync(url, 'utf8');
  if (text.includes(MARK)) continue; // patched by an earlier install
  for (const [from, to, times = 1] of replacements) {
    if (text.split(from).length !== times + 1) {
      console.error(`bin/patchPostgres.js: the text to guard was not found ${times} time(s) in postgres/${file}`);
      process.exit(1);
    }
    text = text.replaceAll(from, () => to);
  }
  writeFileSync(url, text);
}
