// The system features that make a derivation a cluster job (docs/builds.md, "Cluster jobs"):
// `cluster-N` asks for N workers at once (2 ≤ N ≤ 64) and `zone-<label>` for workers of that zone
// (worker.zone). The scheduler reads them; no worker advertises them, and the worker of rank 0
// tells Nix it has them when it builds the job.

const SIZE = /^cluster-(\d{1,2})$/;
const ZONE = /^zone-(.{1,100})$/;
const MAX_CLUSTER_SIZE = 64;

/** The number of workers a derivation needs at once (its `cluster-N` feature), or null for a single-worker build. */
export function clusterSize(features: readonly string[]): number | null {
  for (const feature of features) {
    const n = Number(SIZE.exec(feature)?.[1] ?? NaN);
    if (n >= 2 && n <= MAX_CLUSTER_SIZE) return n;
  }
  return null;
}

/** The zone a cluster derivation asks for with `zone-<label>`; undefined: any one zone. */
export function askedZone(features: readonly string[]): string | undefined {
  for (const feature of features) {
    const zone = ZONE.exec(feature)?.[1];
    if (zone !== undefined) return zone;
  }
  return undefined;
}

/** Features read for placing a cluster job, which no worker needs to advertise. */
export const isPlacementFeature = (feature: string): boolean => SIZE.test(feature) || ZONE.test(feature);
