// Writes .gz, .br and .zst beside each compressible file of the build, at the highest levels:
// done once here so kiln's start only reads files (http/frontend/ picks the smallest a client accepts).
// Argument: the build folder.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, constants, gzipSync, zstdCompressSync } from 'node:zlib';

const dir = process.argv[2] ?? 'build';
const COMPRESSIBLE = /\.(html|js|css|svg|json|txt|map|webmanifest)$/;

let count = 0;
for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !COMPRESSIBLE.test(entry.name)) continue;
  const path = join(entry.parentPath, entry.name);
  const raw = readFileSync(path);
  writeFileSync(`${path}.gz`, gzipSync(raw, { level: 9 }));
  writeFileSync(`${path}.br`, brotliCompressSync(raw, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: raw.length, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT },
  }));
  writeFileSync(`${path}.zst`, zstdCompressSync(raw, { params: { [constants.ZSTD_c_compressionLevel]: 19 } }));
  count++;
}
console.log(`precompress: ${count} files in ${dir}, each as .gz, .br and .zst`);
