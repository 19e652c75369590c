// Turning what Nix says into the spec's failure classes (docs/proto.md, "Failure classes").
// Pure: exit status and message text in, JobFailure out. nix-store --realise exits 100 for a
// failed build, 101 for a timeout, 102 for a hash mismatch (100 + bits, Nix's documented
// convention); everything else is read from the message.
import { jobFailure, type FailureReason, type JobFailure } from '../protocol/index.js';

export interface NixOutcome {
  exitCode: number | null;
  signal: string | null;
  /** Nix's error messages, colours removed */
  errorText: string;
  /** the derivation declares its output hash (a download) */
  fixedOutput?: boolean;
}

/** Messages of the environment, not of the derivation, whatever the exit status. Order matters: the first match wins. */
const ENVIRONMENT_PATTERNS: [RegExp, FailureReason][] = [
  [/No space left on device|disk quota exceeded/i, 'disk_full'],
  [/out of memory|std::bad_alloc|Cannot allocate memory/i, 'out_of_memory'],
  [/unable to start any build|don't know how to build|is not valid|no substituter|path '[^']*' is required, but there is no substituter/i, 'inputs_unavailable'],
  [/substitut(e|ion|er)[^\n]*(fail|error)|failed to substitute|some substitutes for the outputs/i, 'substitution_failed'],
  [/unable to download|Could(n't| not) resolve host|Connection (refused|reset|timed out)|Failed to connect|SSL|HTTP error \d{3}|Timeout was reached|network is unreachable/i, 'network'],
];

const environmentReason = (text: string): FailureReason | undefined => ENVIRONMENT_PATTERNS.find(([pattern]) => pattern.test(text))?.[1];

/** A failed `nix-store --realise` of one derivation. */
export function classifyBuildFailure(outcome: NixOutcome): JobFailure {
  const text = outcome.errorText;
  const message = text || `nix-store exited with ${outcome.exitCode ?? outcome.signal}`;
  // 101 (and 100+1 with --keep-going bits) is Nix's "timed out"; the message tells silence from total time.
  if (outcome.exitCode !== null && outcome.exitCode >= 100 && outcome.exitCode <= 107 && (outcome.exitCode - 100) & 1) {
    return jobFailure(/of silence/.test(text) ? 'max_silent' : 'timeout', message, outcome.exitCode);
  }
  if (/timed out after \d+ seconds of silence/.test(text)) return jobFailure('max_silent', message, outcome.exitCode ?? undefined);
  if (/timed out after \d+ seconds/.test(text)) return jobFailure('timeout', message, outcome.exitCode ?? undefined);
  const environment = environmentReason(text);
  if (environment) return jobFailure(environment, message, outcome.exitCode ?? undefined);
  if (outcome.exitCode === 102 || /hash mismatch in fixed-output derivation/.test(text)) return jobFailure('hash_mismatch', message, outcome.exitCode ?? undefined);
  if (/failed due to signal|killed by signal|builder .* crashed/i.test(text)) return jobFailure('builder_crashed', message, outcome.exitCode ?? undefined);
  const builderExit = /builder for '[^']*' failed with exit code (\d+)/.exec(text);
  if (builderExit) {
    // A fixed-output derivation is a download: its builder failing is almost always the network.
    return jobFailure(outcome.fixedOutput ? 'network' : 'builder_failed', message, Number(builderExit[1]));
  }
  if (/dependencies of derivation '[^']*' failed to build/.test(text)) return jobFailure('inputs_unavailable', message, outcome.exitCode ?? undefined);
  if (outcome.signal) return jobFailure('builder_crashed', `nix-store was killed by ${outcome.signal}: ${message}`);
  return jobFailure('worker_error', message, outcome.exitCode ?? undefined);
}

/** A failed `nix eval`: the expression's fault unless the environment says otherwise. */
export function classifyEvalFailure(errorText: string): JobFailure {
  const environment = environmentReason(errorText);
  // "is not valid" in an evaluation error is about the user's paths, not missing build inputs.
  if (environment && environment !== 'inputs_unavailable') return jobFailure(environment, errorText);
  return jobFailure('eval_error', errorText || 'the evaluation failed without a message');
}
