// Synthetic `nix-store --export` closures for direct build tests that need no Nix: .drv files
// written in ATerm, their store paths computed as Nix computes text paths, wrapped as NARs.
import { randomBytes } from 'node:crypto';
import { encodeNarStrings, encodeNarString, encodeNix32, encodeU64, textStorePath } from '../../protocol/index.js';

export interface ClosurePath {
  path: string;
  nar: Buffer;
  references: string[];
}

export interface SyntheticDrv extends ClosurePath {
  drvPath: string;
  outPath: string;
}

const aterm = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

export const narOfFile = (contents: Buffer | string): Buffer =>
  Buffer.from(encodeNarStrings('nix-archive-1', '(', 'type', 'regular', 'contents', Buffer.from(contents), ')'));

/** A text file (builtins.toFile) in the store. */
export function textFile(name: string, contents: string, references: string[] = []): ClosurePath {
  return { path: textStorePath(name, Buffer.from(contents), references), nar: narOfFile(contents), references };
}

/** A derivation with a made-up output path (the server never recomputes output paths). */
export function syntheticDrv(name: string, opts: { inputDrvs?: SyntheticDrv[]; inputSrcs?: string[]; system?: string; env?: Record<string, string> } = {}): SyntheticDrv {
  const outPath = `/nix/store/${encodeNix32(randomBytes(20))}-${name}`;
  const inputDrvs = [...(opts.inputDrvs ?? [])].sort((a, b) => (a.drvPath < b.drvPath ? -1 : 1));
  const inputSrcs = [...(opts.inputSrcs ?? [])].sort();
  const system = opts.system ?? 'x86_64-linux';
  const env: Record<string, string> = { builder: '/bin/sh', name, out: outPath, system, ...opts.env };
  const text = `Derive([("out",${aterm(outPath)},"","")],[${inputDrvs.map((d) => `(${aterm(d.drvPath)},["out"])`).join(',')}],`
    + `[${inputSrcs.map(aterm).join(',')}],${aterm(system)},"/bin/sh",["-c","echo hi > $out"],`
    + `[${Object.keys(env).sort().map((k) => `(${aterm(k)},${aterm(env[k]!)})`).join(',')}])`;
  const references = [...inputDrvs.map((d) => d.drvPath), ...inputSrcs].sort();
  const drvPath = textStorePath(`${name}.drv`, Buffer.from(text), references);
  return { path: drvPath, drvPath, outPath, nar: narOfFile(text), references };
}

/** The export stream of these paths, in the order given. */
export function exportStream(paths: readonly ClosurePath[]): Buffer {
  const parts: Uint8Array[] = [];
  for (const p of paths) {
    parts.push(encodeU64(1), p.nar, encodeU64(0x4558494e), encodeNarString(p.path), encodeU64(p.references.length));
    for (const r of p.references) parts.push(encodeNarString(r));
    parts.push(encodeNarString(''), encodeU64(0));
  }
  parts.push(encodeU64(0));
  return Buffer.concat(parts);
}

/** A multipart/form-data body: text fields and file fields alike. */
export function multipartBody(fields: readonly [string, string | Buffer][]): { body: Buffer; contentType: string } {
  const boundary = `kiln-${randomBytes(8).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    const file = Buffer.isBuffer(value) ? `; filename="${name}.bin"\r\nContent-Type: application/octet-stream` : '';
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"${file}\r\n\r\n`), Buffer.from(value), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}
