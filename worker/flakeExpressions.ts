// The Nix expressions an evaluation runs, as text. Pure. Data goes in as JSON inside a Nix string
// literal (builtins.fromJSON), so no attribute name or URL is ever spliced into Nix syntax.
import type { AttributeWildcard, WildcardSegment } from '../protocol/index.js';

/** A Nix string literal on one line: `"`, `\`, `${`, newline and return are escaped. */
export const nixString = (text: string): string =>
  `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\$\{/g, '\\${').replace(/\n/g, '\\n').replace(/\r/g, '\\r')}"`;

const segmentJson = (segment: WildcardSegment) =>
  segment.kind === 'any' ? { any: true } : segment.kind === 'literal' ? { lit: segment.name } : { re: segment.regex };

/** The locked flake itself; every expression below reads it as `flake`. */
export const flakeExpression = (flakeRef: string): string => `builtins.getFlake ${nixString(flakeRef)}`;

const flakeBinding = (flakeRef: string) => `flake = ${flakeExpression(flakeRef)};`;

/**
 * The attribute paths the wildcard selects, as a JSON list of name lists. The walk forces only
 * the attribute sets on the way (their names, not their values), stops at derivations, and never
 * enters anything an exclude pattern matches.
 */
export function selectAttributesExpression(flakeRef: string, wildcard: AttributeWildcard): string {
  const patterns = JSON.stringify({ include: wildcard.include.map((p) => p.map(segmentJson)), exclude: wildcard.exclude.map((p) => p.map(segmentJson)) });
  return `let
  ${flakeBinding(flakeRef)}
  w = builtins.fromJSON ${nixString(patterns)};
  segMatches = seg: name: if seg ? any then true else if seg ? lit then seg.lit == name else builtins.match seg.re name != null;
  patMatches = pat: path: builtins.length pat == builtins.length path
    && builtins.all (i: segMatches (builtins.elemAt pat i) (builtins.elemAt path i)) (builtins.genList (i: i) (builtins.length path));
  excluded = path: builtins.any (pat: patMatches pat path) w.exclude;
  isDerivation = value: (value.type or null) == "derivation";
  walk = pat: path: value:
    if path != [] && excluded path then [ ]
    else if pat == [ ] then [ path ]
    else if !(builtins.isAttrs value) || isDerivation value then [ ]
    else let seg = builtins.head pat; rest = builtins.tail pat; in
      if seg ? lit then (if value ? \${seg.lit} then walk rest (path ++ [ seg.lit ]) value.\${seg.lit} else [ ])
      else builtins.concatMap (name: if segMatches seg name then walk rest (path ++ [ name ]) value.\${name} else [ ]) (builtins.attrNames value);
in builtins.concatMap (pat: walk pat [ ] flake.outputs) w.include
`;
}

/**
 * For each attribute path: `{drvPath, outputs}` when it is a derivation, null otherwise, reading
 * `flake` from the scope around it (a `let`, or the pool's subprocess, which binds it once).
 * Reading drvPath instantiates the derivation (writes the .drv files), which the build needs.
 */
export function derivationsOfFlake(paths: readonly (readonly string[])[]): string {
  return `let
  get = path: builtins.foldl' (value: name: value.\${name}) flake.outputs path;
  info = path: let v = get path; in
    if (v.type or null) == "derivation" then {
      drvPath = v.drvPath;
      outputs = builtins.listToAttrs (map (o: { name = o; value = v.\${o}.outPath; }) (v.outputs or [ "out" ]));
    } else null;
in map info (builtins.fromJSON ${nixString(JSON.stringify(paths))})
`;
}
