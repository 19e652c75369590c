// Bounds on what a NAR may hold, checked before any byte of an oversized item is buffered.
export interface NarLimits {
  /** Longest entry name in bytes; 255 is NAME_MAX on every filesystem a store lives on. */
  maxNameBytes: number;
  /** Longest symlink target in bytes; 4095 is PATH_MAX less the NUL. */
  maxTargetBytes: number;
  /** Deepest directory nesting accepted. */
  maxDepth: number;
  /** Largest NAR accepted, in bytes; file lengths beyond it are refused before any is read. */
  maxNarSize: number;
}

export const DEFAULT_NAR_LIMITS: NarLimits = {
  maxNameBytes: 255,
  maxTargetBytes: 4095,
  maxDepth: 1024,
  maxNarSize: Number.MAX_SAFE_INTEGER,
};
