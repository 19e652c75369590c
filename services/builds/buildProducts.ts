// Build products (GET /builds/{id}/downloads and /download/{filename}), by Hydra's convention: an
// output lists them in `$out/nix-support/hydra-build-products`, one per line, as
// `<type> <subtype> <path> [<default path>]` (e.g. `file binary-dist /nix/store/…-app/app.tar.gz`).
// A product is served out of the output's NAR in a cache of the project, as
// /cache/{cache}/serve/{hash}/{path} serves a file; only regular files inside the build's own
// outputs count, so a product line cannot point anywhere else.
import type { Sql } from 'postgres';
import { ApiError, lookupNarListing, parseNarListing, storePathHashPart, storePathName, type NarListing } from '../../protocol/index.js';
import { narSlice, type NarStorage } from '../../storage/index.js';
import type { BuildViewsService } from './buildViews.js';
import type { EvaluationsService } from './evaluations.js';
import type { Principal } from '../access/index.js';
import { projectCaches } from '../caches/index.js';

export const PRODUCTS_FILE = 'nix-support/hydra-build-products';
/** A larger products file is not read: it is a list of names, not data. */
export const MAX_PRODUCTS_FILE_BYTES = 64 * 1024;

export interface BuildProductLine {
  type: string;
  subtype: string;
  path: string;
}

/** Hydra's line format; lines that do not match are skipped, as Hydra does. */
export function parseBuildProducts(text: string): BuildProductLine[] {
  const found: BuildProductLine[] = [];
  for (const raw of text.split('\n')) {
    const m = /^([\w-]+)\s+([\w-]+)\s+("[^"]*"|\S+)(\s+\S+)?\s*$/.exec(raw.trim());
    if (!m) continue;
    const path = m[3]!.startsWith('"') ? m[3]!.slice(1, -1) : m[3]!;
    found.push({ type: m[1]!, subtype: m[2]!, path });
  }
  return found;
}

export interface BuildProduct {
  filename: string;
  type: string;
  subtype: string;
  /** the store path of the file */
  path: string;
  /** the output it belongs to */
  output: string;
  size: number;
  executable: boolean;
}

interface HeldOutput {
  name: string;
  path: string;
  listing: NarListing;
  fileHash: string;
}

interface Located extends BuildProduct {
  fileHash: string;
  narOffset: number;
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c);
  return Buffer.concat(parts);
}

export function buildProductsService(sql: Sql, nars: Pick<NarStorage, 'reads' | 'blobs'>, evaluations: Pick<EvaluationsService, 'visible'>, views: Pick<BuildViewsService, 'build'>) {
  /** Each output of the build that a cache of the project holds, with its listing. */
  async function heldOutputs(projectId: string, outputs: Record<string, string | null>): Promise<HeldOutput[]> {
    const caches = await projectCaches(sql, projectId);
    const held: HeldOutput[] = [];
    for (const [name, path] of Object.entries(outputs).sort(([a], [b]) => (a === 'out' ? -1 : b === 'out' ? 1 : a.localeCompare(b)))) {
      if (path === null) continue;
      const hash = storePathHashPart(path);
      for (const cache of caches) {
        const row = await nars.reads.listing(cache.id, hash);
        if (!row) continue;
        const listing = parseNarListing(row.listing);
        if (!listing.ok) throw new Error(`the stored listing of ${path} does not parse: ${listing.field}: ${listing.reason}`);
        held.push({ name, path, listing: listing.value, fileHash: row.fileHash });
        break;
      }
    }
    return held;
  }

  async function products(who: Principal, buildId: string): Promise<Located[]> {
    const build = await views.build(who, buildId);
    const label = await evaluations.visible(who, build.evaluation_id, 'viewProject');
    const held = await heldOutputs(label.project_id, build.outputs);
    const found: Located[] = [];
    const names = new Set<string>();
    for (const output of held) {
      const file = lookupNarListing(output.listing, PRODUCTS_FILE);
      if (file?.type !== 'regular' || file.size > MAX_PRODUCTS_FILE_BYTES) continue;
      const text = (await collect(narSlice(nars.blobs, output.fileHash, file.narOffset, file.size))).toString('utf8');
      for (const line of parseBuildProducts(text)) {
        // An output that is itself a file may name itself: its product is called by the path's name.
        const owner = held.find((o) => line.path === o.path || line.path.startsWith(`${o.path}/`));
        if (!owner) continue;
        const inside = line.path.slice(owner.path.length + 1);
        const node = lookupNarListing(owner.listing, inside);
        if (node?.type !== 'regular') continue;
        const filename = inside === '' ? storePathName(owner.path) : inside.slice(inside.lastIndexOf('/') + 1);
        // Hydra names a product by its file name; the first of two with the same name wins.
        if (names.has(filename)) continue;
        names.add(filename);
        found.push({
          filename, type: line.type, subtype: line.subtype, path: line.path, output: owner.name, size: node.size, executable: node.executable,
          fileHash: owner.fileHash, narOffset: node.narOffset,
        });
      }
    }
    return found;
  }

  return {
    async list(who: Principal, buildId: string): Promise<BuildProduct[]> {
      return (await products(who, buildId)).map(({ fileHash: _f, narOffset: _o, ...p }) => p);
    },

    /** One product's bytes; 404 for a name the build does not list. */
    async open(who: Principal, buildId: string, filename: string): Promise<{ product: BuildProduct; body: AsyncIterable<Uint8Array> }> {
      const found = (await products(who, buildId)).find((p) => p.filename === filename);
      if (!found) throw new ApiError('not_found', `build ${buildId} has no product named ${JSON.stringify(filename.slice(0, 200))}`);
      const { fileHash, narOffset, ...product } = found;
      return { product, body: narSlice(nars.blobs, fileHash, narOffset, product.size) };
    },
  };
}
export type BuildProductsService = ReturnType<typeof buildProductsService>;
