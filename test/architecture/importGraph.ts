// The import graph of kiln's source folders, read from the text of each file: what the layout
// tests check the layer order, the public faces and the absence of cycles against.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const SOURCE_FOLDERS = ['protocol', 'config', 'storage', 'actors', 'supervisors', 'services', 'http', 'cli', 'worker'] as const;

export interface Edge {
  from: string;
  to: string;
  /** `import type` / `export type`: erased at run time. */
  typeOnly: boolean;
}

function sourceFiles(folder: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(relative(ROOT, p));
    }
  };
  walk(join(ROOT, folder));
  return out;
}

/** Every relative import between source files, with whether it is erased at run time. */
export function importEdges(): Edge[] {
  const edges: Edge[] = [];
  for (const folder of SOURCE_FOLDERS) {
    for (const file of sourceFiles(folder)) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const m of text.matchAll(/(?:^|\n)\s*(import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/g)) {
        const to = normalize(join(dirname(file), m[3]!.replace(/\.js$/, '.ts')));
        edges.push({ from: file, to, typeOnly: Boolean(m[2]) });
      }
      for (const m of text.matchAll(/\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g)) {
        edges.push({ from: file, to: normalize(join(dirname(file), m[1]!.replace(/\.js$/, '.ts'))), typeOnly: false });
      }
    }
  }
  return edges;
}

/** The cycles of a directed graph (one per strongly connected component of more than one node). */
export function cycles(nodes: Iterable<string>, next: (n: string) => string[]): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index); low.set(v, index); index++;
    stack.push(v); onStack.add(v);
    for (const w of next(v)) {
      if (!idx.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); }
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do { w = stack.pop()!; onStack.delete(w); scc.push(w); } while (w !== v);
      if (scc.length > 1) found.push(scc.sort());
    }
  };
  for (const n of nodes) if (!idx.has(n)) visit(n);
  return found;
}
