// The layout rules of docs/architecture.md, checked on the import graph: folders depend only on
// the folders before them, reach another folder only through its index.ts, services/ holds domain
// folders that reach each other only through their index.ts, and no import cycle exists.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ROOT, cycles, importEdges } from './importGraph.js';

const LAYERS = ['protocol', 'config', 'storage', 'actors', 'supervisors', 'services', 'http', 'cli'];
const WORKER_MAY_USE = ['protocol', 'config'];
/** services/ beside its domain folders: only its public face. */
const SERVICES_TOP_FILES = ['index.ts'];

const edges = importEdges();
const folderOf = (file: string): string => file.split('/')[0]!;
const domainOf = (file: string): string | undefined => /^services\/([^/]+)\//.exec(file)?.[1];

t.test('a folder imports only folders before it in the layer order', async (t) => {
  const wrong = edges.filter((e) => {
    const from = folderOf(e.from);
    const to = folderOf(e.to);
    if (from === to) return false;
    if (from === 'worker') return !WORKER_MAY_USE.includes(to);
    // The `kiln worker` command starts the worker; nothing else of the server side loads it.
    if (to === 'worker') return from !== 'cli';
    return LAYERS.indexOf(to) > LAYERS.indexOf(from);
  });
  t.same(wrong.map((e) => `${e.from} -> ${e.to}`), []);
});

// A folder's threadFace.ts is the small part of its face that a serving thread's files load (below).
t.test('another folder is reached only through its index.ts or threadFace.ts', async (t) => {
  const wrong = edges.filter((e) => folderOf(e.from) !== folderOf(e.to) && !/^[a-z]+\/(index|threadFace)\.ts$/.test(e.to));
  t.same(wrong.map((e) => `${e.from} -> ${e.to}`), []);
});

t.test('services/ holds domain folders, each with an index.ts', async (t) => {
  const dir = join(ROOT, 'services');
  const entries = readdirSync(dir);
  const files = entries.filter((e) => !statSync(join(dir, e)).isDirectory());
  t.same(files.filter((f) => !SERVICES_TOP_FILES.includes(f)), [], 'no service file outside a domain folder');
  for (const domain of entries.filter((e) => statSync(join(dir, e)).isDirectory())) {
    t.ok(readdirSync(join(dir, domain)).includes('index.ts'), `services/${domain}/index.ts exists`);
  }
});

t.test('a domain reaches another domain only through its index.ts', async (t) => {
  const wrong = edges.filter((e) => {
    const from = domainOf(e.from);
    const to = domainOf(e.to);
    return to !== undefined && from !== to && !e.to.endsWith(`services/${to}/index.ts`) && folderOf(e.from) === 'services';
  });
  t.same(wrong.map((e) => `${e.from} -> ${e.to}`), []);
});

t.test('the domains depend on each other one way', async (t) => {
  const uses = new Map<string, Set<string>>();
  for (const e of edges) {
    const from = domainOf(e.from);
    const to = domainOf(e.to);
    if (from && to && from !== to) uses.set(from, (uses.get(from) ?? new Set()).add(to));
  }
  t.same(cycles(uses.keys(), (d) => [...(uses.get(d) ?? [])]), []);
});

t.test('no import cycle between source files, type imports included', async (t) => {
  const next = new Map<string, string[]>();
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  t.same(cycles(next.keys(), (f) => next.get(f) ?? []), []);
});

// Every serving thread loads its own copy of what it imports: storage/index.ts would bring the
// database, S3 and Redis clients into each (about 40 MiB of heap per thread), protocol/index.ts
// every API schema (about 12 MiB; docs/http.md, "Memory").
t.test('a serving thread loads no public face but threadFace.ts files', async (t) => {
  const runtime = edges.filter((e) => !e.typeOnly);
  const reached = new Set<string>(['http/serving/servingThread.ts']);
  for (const file of reached) for (const e of runtime) if (e.from === file) reached.add(e.to);
  t.same([...reached].filter((f) => /^[a-z]+\/index\.ts$/.test(f)), []);
  t.same([...reached].filter((f) => folderOf(f) === 'storage').sort(), ['storage/nars/readPace.ts', 'storage/nars/sharedReadPlaces.ts', 'storage/nars/storageReadGate.ts', 'storage/nars/threadReadLine.ts', 'storage/restingHeap.ts', 'storage/threadFace.ts']);
});
