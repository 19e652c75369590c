// Module hooks registered by typescriptLoader.mjs (they run on Node's loader thread): `./x.js`
// names `./x.ts` when only the .ts file exists, as TypeScript's NodeNext resolution has it, and a
// .ts file is transformed by esbuild into an ES module with an inline source map.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';

// The parts of tsconfig.json that change what esbuild emits: imports stay as written
// (verbatimModuleSyntax), class fields are defined as in ES2022+ (target ES2023).
const tsconfigRaw = { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } };

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    const relative = specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('file:');
    if (!relative || !specifier.endsWith('.js') || error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
    return nextResolve(`${specifier.slice(0, -3)}.ts`, context);
  }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context);
  const path = fileURLToPath(url);
  const source = await readFile(path, 'utf8');
  const { code } = await transform(source, {
    loader: 'ts',
    format: 'esm',
    target: `node${process.versions.node}`,
    sourcemap: 'inline',
    sourcesContent: true,
    sourcefile: path,
    tsconfigRaw,
  });
  return { format: 'module', source: code, shortCircuit: true };
}
