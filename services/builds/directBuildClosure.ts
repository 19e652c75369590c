// What a direct build submits (docs/builds.md, "Direct builds"): the closure of a .drv as
// `nix-store --export $(nix-store -qR x.drv)` writes it. Every path must be content-addressed
// (a .drv or another text file, or a source added by hash), and each is checked by recomputing
// its store path from its bytes: the server signs these paths into caches, so no uploader may
// smuggle in a path whose name promises other contents. Build outputs come only from workers.
import {
  ApiError,
  DerivationNode,
  describeIssue,
  narFileContents,
  parseDerivation,
  parseNixExport,
  sourceStorePath,
  storePathName,
  textStorePath,
  type Derivation,
  type ExportedPath,
} from '../../protocol/index.js';

export interface DirectClosure {
  /** the .drv to build */
  root: string;
  /** every path of the export, to be signed into the target caches */
  paths: ExportedPath[];
  /** the derivations the root needs, the root included, inputs before the derivations that use them */
  derivations: DerivationNode[];
}

const invalid = (message: string) => new ApiError('invalid_closure', message);

/** True when the path's name follows from its bytes and references (text or source). */
function contentAddressed(p: ExportedPath): boolean {
  const name = storePathName(p.path);
  const self = p.references.includes(p.path);
  const others = p.references.filter((r) => r !== p.path);
  const contents = narFileContents(p.nar);
  if (contents && !self && textStorePath(name, contents, others) === p.path) return true;
  return sourceStorePath(name, p.nar, others, self) === p.path;
}

const seconds = (value: unknown): number | null => {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  return Number.isSafeInteger(n) && n >= 0 && n <= 366 * 24 * 3600 ? n : null;
};

/** The node the scheduler needs, with the scheduling attributes the worker reads for evaluations too. */
function nodeOf(drvPath: string, drv: Derivation): DerivationNode {
  let attrs: Record<string, unknown> = drv.env;
  if (typeof drv.env['__json'] === 'string') {
    try {
      attrs = JSON.parse(drv.env['__json']) as Record<string, unknown>;
    } catch {
      attrs = {};
    }
  }
  const features = attrs['requiredSystemFeatures'];
  const list = Array.isArray(features) ? features.filter((f): f is string => typeof f === 'string') : typeof features === 'string' ? features.split(/\s+/) : [];
  const candidate = {
    drvPath,
    name: drv.env['name'] ?? storePathName(drvPath).slice(0, -4),
    outputs: Object.fromEntries(Object.entries(drv.outputs).map(([name, o]) => [name, o.path === '' ? null : o.path])),
    inputDrvs: drv.inputDrvs,
    inputSrcs: drv.inputSrcs,
    system: drv.system,
    requiredSystemFeatures: list.filter((f) => /^[A-Za-z0-9_.+-]{1,64}$/.test(f)),
    timeoutSecs: seconds(attrs['timeout']),
    maxSilentSecs: seconds(attrs['maxSilent']),
    preferLocalBuild: attrs['preferLocalBuild'] === true || attrs['preferLocalBuild'] === '1',
    fixedOutput: Object.values(drv.outputs).some((o) => o.hash !== ''),
  };
  const parsed = DerivationNode.safeParse(candidate);
  if (!parsed.success) {
    const { field, reason } = describeIssue(parsed.error, 'derivation');
    throw invalid(`${drvPath}: ${field}: ${reason}`);
  }
  return parsed.data;
}

/** Parses and checks an export stream; `wanted` names the .drv to build (else the closure's only root). */
export function readDirectClosure(bytes: Buffer, wanted: string | null): DirectClosure {
  const parsed = parseNixExport(bytes);
  if (!parsed.ok) throw invalid(parsed.reason);
  const paths = parsed.value;
  if (paths.length === 0) throw invalid('the closure part holds no store paths; send nix-store --export $(nix-store -qR /nix/store/…drv)');
  const byPath = new Map<string, ExportedPath>();
  for (const p of paths) {
    if (byPath.has(p.path)) throw invalid(`${p.path} occurs twice in the export`);
    byPath.set(p.path, p);
  }
  for (const p of paths) {
    const missing = p.references.find((r) => !byPath.has(r));
    if (missing) throw invalid(`the closure is incomplete: ${p.path} refers to ${missing}, which it does not hold; export the whole closure (nix-store -qR)`);
    if (!contentAddressed(p)) {
      throw invalid(`${p.path} is not content-addressed (its name does not follow from its bytes); a direct build takes only .drv files and sources, never build outputs`);
    }
  }

  const derivations = new Map<string, Derivation>();
  for (const p of paths) {
    if (!p.path.endsWith('.drv')) continue;
    const contents = narFileContents(p.nar);
    if (!contents) throw invalid(`${p.path} is not a single regular file, so it is no derivation`);
    const drv = parseDerivation(contents.toString('utf8'), p.path);
    if (!drv.ok) throw invalid(`${p.path}: ${drv.reason}`);
    derivations.set(p.path, drv.value);
  }
  if (derivations.size === 0) throw invalid('the closure holds no .drv file');

  let root: string;
  if (wanted !== null) {
    if (!derivations.has(wanted)) throw invalid(`the drv part names ${wanted}, which is not a derivation of the closure`);
    root = wanted;
  } else {
    const inputs = new Set([...derivations.values()].flatMap((d) => Object.keys(d.inputDrvs)));
    const roots = [...derivations.keys()].filter((d) => !inputs.has(d));
    if (roots.length !== 1) throw invalid(`the closure has ${roots.length} root derivations (${roots.slice(0, 5).join(', ')}); name the one to build in a drv part`);
    root = roots[0]!;
  }

  // Inputs first (depth-first post-order), so edges always point at recorded derivations.
  const order: DerivationNode[] = [];
  const seen = new Set<string>();
  const visit = (drvPath: string, depth: number): void => {
    if (seen.has(drvPath)) return;
    if (depth > 10_000) throw invalid('the derivation graph is too deep');
    seen.add(drvPath);
    const drv = derivations.get(drvPath);
    if (!drv) throw invalid(`the closure is incomplete: it lacks the input derivation ${drvPath}`);
    for (const input of Object.keys(drv.inputDrvs)) visit(input, depth + 1);
    for (const src of drv.inputSrcs) if (!byPath.has(src)) throw invalid(`the closure is incomplete: it lacks the input source ${src} of ${drvPath}`);
    order.push(nodeOf(drvPath, drv));
  };
  visit(root, 0);
  return { root, paths, derivations: order };
}
