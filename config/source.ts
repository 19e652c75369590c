/** Where an effective value came from, lowest to highest precedence: default/derived, file, env, flag, override. */
export type SourceKind = 'default' | 'derived' | 'file' | 'env' | 'flag' | 'override';

export interface Source {
  readonly kind: SourceKind;
  /** The config file path, the environment variable, the flag, or for derived values what they came from. */
  readonly name?: string;
}

/** How a source reads after "from" in messages and in `kiln config print`: the file, variable, flag or option it came from. */
export function sourceLabel(source: Source): string {
  if (source.kind === 'default' || source.kind === 'override') return source.kind;
  return source.name ?? source.kind;
}
